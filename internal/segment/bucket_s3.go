//go:build s3

package segment

// s3:// blob URLs, in builds with the s3 tag (go build -tags s3): the AWS
// SDK roughly doubles the binary's dependencies and its cold build time.
import _ "gocloud.dev/blob/s3blob"
