package segment

import "errors"

// ErrCorrupt is returned (wrapped) when a manifest or block exists but cannot
// be decoded: retrying does not mend it.
var ErrCorrupt = errors.New("corrupt segment blob")
