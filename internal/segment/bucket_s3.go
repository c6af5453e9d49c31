package segment

// s3:// blob URLs (gocloud.dev/blob/s3blob, AWS SDK v2): AWS S3 and
// S3-compatible servers, e.g.
// "s3://bucket?region=us-east-1&endpoint=http://10.0.0.5:7070&use_path_style=true".
// Credentials come from the AWS SDK's usual chain (AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY, a shared profile, an instance or pod role).
import _ "gocloud.dev/blob/s3blob"
