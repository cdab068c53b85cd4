package catalog

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"
)

// TestMissingBucketHintNamesTheEndpoint: the command a missing bucket's
// error suggests creates the bucket where floe looked. With a custom
// endpoint (MinIO, versitygw) a bare 'aws s3 mb' asks AWS (older aws CLIs
// ignore AWS_ENDPOINT_URL_S3, as docs/deployment.md says), so it carries
// --endpoint-url (from a new-user run against MinIO).
func TestMissingBucketHintNamesTheEndpoint(t *testing.T) {
	noBucket := &smithy.OperationError{ServiceID: "S3", OperationName: "ListObjectsV2",
		Err: &smithy.GenericAPIError{Code: "NoSuchBucket", Message: "The specified bucket does not exist"}}
	for _, c := range []struct {
		endpoint, want string
	}{
		{"http://127.0.0.1:9000", "'aws --endpoint-url http://127.0.0.1:9000 s3 mb s3://lake'"},
		{"", "'aws s3 mb s3://lake'"},
	} {
		s := &s3Storage{cfg: aws.Config{Region: "eu-west-1"}, endpoint: c.endpoint}
		err := s.explain(noBucket, "lake")
		if !errors.Is(err, ErrBucketNotFound) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("endpoint %q: %v, want ErrBucketNotFound suggesting %s", c.endpoint, err, c.want)
		}
	}
}
