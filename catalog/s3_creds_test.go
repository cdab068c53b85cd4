package catalog

import (
	"log/slog"
	"strings"
	"testing"
)

// TestS3HalfCredentials (from a new-user run): a secret access key given
// as a flag while the key id came from AWS_ACCESS_KEY_ID was told to set
// both, which it had; the error says which half is missing and that the
// flags are not combined with the AWS_* variables.
func TestS3HalfCredentials(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "from-the-environment")
	for cfg, want := range map[S3Config]string{
		{SecretAccessKey: "s"}: "the secret access key is set and the access key id is not",
		{AccessKeyID: "k"}:     "the access key id is set and the secret access key is not",
	} {
		_, err := resolveS3(t.Context(), cfg, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "not combined with AWS_* variables") {
			t.Errorf("%+v: %v; want %q", cfg, err, want)
		}
	}
}
