// Package catalog opens the places floe's tables live: catalogs (SQLite,
// PostgreSQL, REST, Glue) and object stores (a file warehouse, S3 or an
// S3-compatible server such as MinIO, configured the AWS way), and explains
// their failures to a person: a missing bucket, rejected credentials, an
// endpoint or a catalog that does not answer, each attributed to the
// component at fault and named with what to fix. It also tells which of
// those failures may pass on their own (IsTransient), so that a sink can
// retry them.
//
// It owns nothing of the tables' contents: writing, committing and reading
// the ledger are package snapshot's, which receives the catalog Open
// returns and never imports this package. Its import path ends like
// iceberg-go's catalog package; code that needs both imports iceberg-go's
// as icecat.
package catalog
