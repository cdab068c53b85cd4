package mapping

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func wideCommit(partitions int32) Commit {
	c := Commit{ID: "0b7c1c9e-8f0e-4a53-9d37-6a1d0f6c7a10", Writer: "host:42:abcd",
		TopicIDs: map[string]string{"wide": "8bMxWQbKQ0yJDWexrLrJWA"}}
	for p := range partitions {
		c.Ranges = append(c.Ranges, rng("wide", p, int64(p)*1000, int64(p)*1000+100, 100))
	}
	c.Ranges = append(c.Ranges, Range{TopicPartition: tp("wide", 0), Interval: Interval{100, 200}, Lost: true})
	return c
}

// A commit whose ranges are in a ranges file has a summary of the same
// size however many partitions it covers, and decodes from the file to the
// commit it was encoded from.
func TestRangesFileRoundTrip(t *testing.T) {
	const path = "file:///w/lake/t/metadata/floe-ranges/0b7c1c9e-8f0e-4a53-9d37-6a1d0f6c7a10.json"
	var sizes []int
	for _, n := range []int32{10, 1000} {
		c := wideCommit(n)
		props, file, err := c.EncodeRangesFile(path)
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for k, v := range props {
			size += len(k) + len(v)
		}
		sizes = append(sizes, size)
		if props[KeyVersion] != LedgerVersionRangesFile || props[KeyRangesCount] != "1001" && n == 1000 {
			t.Fatalf("summary %v", props)
		}
		at := time.UnixMilli(1_700_000_000_000).UTC()
		got, err := DecodeRangesFile(7, at, props, file)
		if err != nil {
			t.Fatal(err)
		}
		want := c
		want.SnapshotID, want.CommittedAt = 7, at
		SortRanges(want.Ranges)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip of %d partitions:\n got %+v\nwant %+v", n, got, want)
		}
		// The inline form (what an archive keeps) decodes the same.
		inline, err := ResolveRangesFile(7, props, file)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := DecodeCommit(7, at, inline); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("inline form: %v\n got %+v\nwant %+v", err, got, want)
		}
		// Without its file, the summary is an error, never "no ranges".
		if _, err := DecodeCommit(7, at, props); !errors.Is(err, ErrRangesFile) {
			t.Fatalf("decoding a referencing summary without its file: %v", err)
		}
	}
	// Only the count's digits differ.
	if sizes[1]-sizes[0] > 2 {
		t.Fatalf("summary of 10 partitions is %d bytes, of 1000 %d: want the same but for the count", sizes[0], sizes[1])
	}
}

func TestRangesFileRejectsAnotherFile(t *testing.T) {
	const path = "file:///w/t/metadata/floe-ranges/x.json"
	c := wideCommit(20)
	props, file, err := c.EncodeRangesFile(path)
	if err != nil {
		t.Fatal(err)
	}
	other := c
	other.ID = "1b7c1c9e-8f0e-4a53-9d37-6a1d0f6c7a10"
	_, otherFile, err := other.EncodeRangesFile(path)
	if err != nil {
		t.Fatal(err)
	}
	short := c
	short.Ranges = short.Ranges[1:]
	_, shortFile, err := short.EncodeRangesFile(path)
	if err != nil {
		t.Fatal(err)
	}
	withDigest := func(file []byte) map[string]string {
		p := map[string]string{}
		for k, v := range props {
			p[k] = v
		}
		sum := sha256.Sum256(file)
		p[KeyRangesSHA256] = hex.EncodeToString(sum[:])
		return p
	}
	tampered := []byte(strings.Replace(string(file), "0:0-100:100", "0:0-100:99", 1))
	cases := map[string]struct {
		props map[string]string
		file  []byte
		want  string
	}{
		"tampered":       {props, tampered, "SHA-256"},
		"other commit":   {withDigest(otherFile), otherFile, "written for commit"},
		"fewer ranges":   {withDigest(shortFile), shortFile, "holds 20 ranges"},
		"not json":       {withDigest([]byte("nope")), []byte("nope"), "not a ranges file"},
		"empty":          {props, nil, "SHA-256"},
		"other's digest": {props, otherFile, "SHA-256"},
	}
	for name, tc := range cases {
		_, err := DecodeRangesFile(7, time.Time{}, tc.props, tc.file)
		if !errors.Is(err, ErrRangesFile) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want a ranges file error saying %q", name, err, tc.want)
		}
	}
	bad := map[string]map[string]string{
		"inline too":   {KeyVersion: "3", KeyCommitID: "id", KeyRangesFile: path, KeyRangesSHA256: props[KeyRangesSHA256], KeyRangesCount: "1", "floe.ranges.t": "0:0-1:1"},
		"old version":  {KeyVersion: "2", KeyCommitID: "id", KeyRangesFile: path, KeyRangesSHA256: props[KeyRangesSHA256], KeyRangesCount: "1"},
		"no digest":    {KeyVersion: "3", KeyCommitID: "id", KeyRangesFile: path, KeyRangesCount: "1"},
		"zero count":   {KeyVersion: "3", KeyCommitID: "id", KeyRangesFile: path, KeyRangesSHA256: props[KeyRangesSHA256], KeyRangesCount: "0"},
		"no path":      {KeyVersion: "3", KeyCommitID: "id", KeyRangesSHA256: props[KeyRangesSHA256], KeyRangesCount: "1"},
		"short digest": {KeyVersion: "3", KeyCommitID: "id", KeyRangesFile: path, KeyRangesSHA256: "abc", KeyRangesCount: "1"},
	}
	for name, p := range bad {
		var me *MalformedError
		if _, err := DecodeCommit(7, time.Time{}, p); !errors.As(err, &me) {
			t.Errorf("%s: got %v, want a *MalformedError", name, err)
		}
	}
}
