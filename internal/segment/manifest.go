package segment

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/google/uuid"
)

// formatVersion is Manifest.FormatVersion of the manifests this package writes
// and the only one it reads.
const formatVersion = 1

func collectionPrefix(collectionID string) string {
	return "collections/" + collectionID + "/"
}

func blocksPrefix(collectionID string) string {
	return collectionPrefix(collectionID) + "blocks/"
}

func manifestsPrefix(collectionID string) string {
	return collectionPrefix(collectionID) + "manifests/"
}

// newBlockKey returns a fresh key for a block of collectionID.
func newBlockKey(collectionID string) string {
	return blocksPrefix(collectionID) + uuid.NewString() + ".parquet"
}

// newManifestKey returns a fresh key for a manifest of version; keys sort by
// version.
func newManifestKey(collectionID string, version int64) string {
	return fmt.Sprintf("%s%020d-%s.json", manifestsPrefix(collectionID), version, uuid.NewString())
}

// checkCollectionID rejects ids that cannot be one path segment of a key.
func checkCollectionID(id string) error {
	switch {
	case id == "":
		return errors.New("empty collection id")
	case id == "." || id == "..":
		return fmt.Errorf("invalid collection id %q", id)
	case strings.ContainsAny(id, "/\\"):
		return fmt.Errorf("invalid collection id %q: contains a slash", id)
	}
	for _, c := range id {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("invalid collection id %q: contains a control character", id)
		}
	}
	return nil
}

// owner returns the index of the block of blocks (non-empty, sorted by MinID)
// that owns id: the last block whose MinID <= id, or the first block.
func owner(blocks []BlockRef, id string) int {
	i := sort.Search(len(blocks), func(i int) bool { return blocks[i].MinID > id }) - 1
	return max(i, 0)
}

// checkManifest checks the invariants every manifest keeps.
func checkManifest(m *Manifest) error {
	if m.FormatVersion != formatVersion {
		return fmt.Errorf("unsupported format version %d (want %d)", m.FormatVersion, formatVersion)
	}
	if err := checkCollectionID(m.CollectionID); err != nil {
		return err
	}
	if m.Version < 1 {
		return fmt.Errorf("version %d < 1", m.Version)
	}
	prefix := blocksPrefix(m.CollectionID)
	var total int64
	for i, b := range m.Blocks {
		switch {
		case !strings.HasPrefix(b.Key, prefix):
			return fmt.Errorf("block %d: key %q is not under %s", i, b.Key, prefix)
		case b.Records < 1:
			return fmt.Errorf("block %s: %d records", b.Key, b.Records)
		case b.MinID > b.MaxID:
			return fmt.Errorf("block %s: min id %q > max id %q", b.Key, b.MinID, b.MaxID)
		case i > 0 && m.Blocks[i-1].MaxID >= b.MinID:
			return fmt.Errorf("block %s: range overlaps or precedes the previous block's", b.Key)
		}
		total += b.Records
	}
	if total != m.RecordCount {
		return fmt.Errorf("record count %d, blocks hold %d", m.RecordCount, total)
	}
	return nil
}

func encodeManifest(m *Manifest) ([]byte, error) {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

func decodeManifest(data []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	if err := checkManifest(&m); err != nil {
		return nil, err
	}
	return &m, nil
}
