package catalog

// ValidateCollectionName checks a collection name as CreateCollection does:
// non-empty after trimming white space, at most 256 bytes, valid UTF-8, no
// control or format characters. Err: wraps ErrInvalidArgument; it never
// repeats the name.
func ValidateCollectionName(name string) error { return validateName(name) }

// MaxDimension is the largest embedding dimension a collection may have.
const MaxDimension = maxDimension
