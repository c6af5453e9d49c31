package segment

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// formatVersion is Manifest.FormatVersion of a manifest without deltas;
// formatVersionDeltas that of one with deltas (Manifest.Deltas came with
// it). A manifest without deltas keeps version 1, so that a reader from
// before deltas still reads it; both are read.
const (
	formatVersion       = 1
	formatVersionDeltas = 2
)

func collectionPrefix(collectionID string) string {
	return "collections/" + collectionID + "/"
}

func blocksPrefix(collectionID string) string {
	return collectionPrefix(collectionID) + "blocks/"
}

func deltasPrefix(collectionID string) string {
	return collectionPrefix(collectionID) + "deltas/"
}

func manifestsPrefix(collectionID string) string {
	return collectionPrefix(collectionID) + "manifests/"
}

// newBlockKey returns a fresh key for a block of collectionID.
func newBlockKey(collectionID string) string {
	return blocksPrefix(collectionID) + uuid.NewString() + ".parquet"
}

// newDeltaKey returns a fresh key for a delta of collectionID.
func newDeltaKey(collectionID string) string {
	return deltasPrefix(collectionID) + uuid.NewString() + ".parquet"
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

// maxManifestBytes bounds the size of a manifest a read decodes. A manifest
// lists a collection's blocks in about 250 bytes each (ids up to 1 KiB each
// make it more): 256 MiB is far above any real one.
const maxManifestBytes = 256 << 20

// maxDimension is the catalog's largest embedding dimension
// (catalog.maxDimension).
const maxDimension = 65536

// maxBlockRecords is the most records a block entry may claim: more rows
// than one block decode may hold (MaxBlockDecodeBytes) cannot be read.
const maxBlockRecords = MaxBlockDecodeBytes / decodeBytesPerRow

// checkRef checks what the manifest entries of blocks and deltas share:
// the i-th entry of kind ("block" or "delta") has a key of a Parquet file
// directly under prefix, not in seen (it is added), a size in bytes not
// negative, and a non-empty id range.
func checkRef(kind string, i int, key, prefix string, seen map[string]bool, bytes int64, minID, maxID string) error {
	name, ok := strings.CutPrefix(key, prefix)
	switch {
	case !ok || !strings.HasSuffix(name, ".parquet") || strings.ContainsAny(name, "/\\") || strings.HasPrefix(name, "."):
		return fmt.Errorf("%s %d: key %q is not a %s key under %s", kind, i, key, kind, prefix)
	case seen[key]:
		return fmt.Errorf("%s %d: key %s listed twice", kind, i, key)
	case bytes < 0:
		return fmt.Errorf("%s %s: %d bytes", kind, key, bytes)
	case minID == "":
		return fmt.Errorf("%s %s: empty min id", kind, key)
	case minID > maxID:
		return fmt.Errorf("%s %s: min id %q > max id %q", kind, key, minID, maxID)
	}
	seen[key] = true
	return nil
}

// checkManifest checks the invariants every manifest keeps: known format,
// a valid collection id and version, sane offsets and sizes, blocks with
// keys of the collection (each once), non-empty ranges sorted and disjoint,
// record counts that add up, and deltas with keys of the collection (each
// once), non-empty ranges and row counts a read can hold (checkDeltas).
func checkManifest(m *Manifest) error {
	if m.FormatVersion != formatVersion && m.FormatVersion != formatVersionDeltas {
		return fmt.Errorf("unsupported format version %d (want %d or %d)", m.FormatVersion, formatVersion, formatVersionDeltas)
	}
	if m.FormatVersion == formatVersion && len(m.Deltas) > 0 {
		return fmt.Errorf("format version %d lists %d deltas (deltas came with version %d)", m.FormatVersion, len(m.Deltas), formatVersionDeltas)
	}
	if err := checkCollectionID(m.CollectionID); err != nil {
		return err
	}
	switch {
	case m.Version < 1:
		return fmt.Errorf("version %d < 1", m.Version)
	case m.CompactionOffset < 0:
		return fmt.Errorf("compaction offset %d < 0", m.CompactionOffset)
	case m.Dimension < 0 || m.Dimension > maxDimension:
		return fmt.Errorf("dimension %d outside 0..%d", m.Dimension, maxDimension)
	}
	prefix := blocksPrefix(m.CollectionID)
	keys := make(map[string]bool, len(m.Blocks))
	var total int64
	for i, b := range m.Blocks {
		if err := checkRef("block", i, b.Key, prefix, keys, b.Bytes, b.MinID, b.MaxID); err != nil {
			return err
		}
		switch {
		case b.Records < 1 || b.Records > maxBlockRecords:
			return fmt.Errorf("block %s: %d records, outside 1..%d", b.Key, b.Records, maxBlockRecords)
		case i > 0 && m.Blocks[i-1].MaxID >= b.MinID:
			return fmt.Errorf("block %s: range overlaps or precedes the previous block's", b.Key)
		}
		total += b.Records
	}
	if err := checkIndex(m); err != nil {
		return err
	}
	if len(m.Deltas) == 0 {
		if total != m.RecordCount {
			return fmt.Errorf("record count %d, blocks hold %d", m.RecordCount, total)
		}
		return nil
	}
	return checkDeltas(m, total)
}

func encodeManifest(m *Manifest) ([]byte, error) {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// decodeManifest decodes and checks a manifest of at most maxManifestBytes.
func decodeManifest(data []byte) (*Manifest, error) {
	if len(data) > maxManifestBytes {
		return nil, fmt.Errorf("%d bytes, more than the %d a manifest may have", len(data), maxManifestBytes)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	if err := checkManifest(&m); err != nil {
		return nil, err
	}
	return &m, nil
}

// decodeManifestAt decodes the manifest stored at key and checks that it is
// the manifest key names: one of its collection, of the version in its name.
// Errors are *CorruptError.
func decodeManifestAt(key string, data []byte) (*Manifest, error) {
	m, err := decodeManifest(data)
	if err != nil {
		return nil, corrupt(KindManifest, key, err)
	}
	name, ok := strings.CutPrefix(key, manifestsPrefix(m.CollectionID))
	if !ok {
		return nil, corrupt(KindManifest, key, fmt.Errorf("manifest of collection %s stored under another collection", m.CollectionID))
	}
	if v, _, ok := strings.Cut(name, "-"); ok && len(v) == 20 {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n != m.Version {
			return nil, corrupt(KindManifest, key, fmt.Errorf("manifest of version %d stored under version %d", m.Version, n))
		}
	}
	return m, nil
}

// References reports whether m lists the blob at key (a block, a delta or
// an index blob).
func (m *Manifest) References(key string) bool {
	return slices.Contains(m.blobKeys(), key)
}

// blobKeys returns the keys of the blobs m references: its blocks, its
// deltas and its index blobs (GC keeps or deletes them together; an index
// chunk shared with a kept version stays).
func (m *Manifest) blobKeys() []string {
	keys := make([]string, 0, len(m.Blocks)+len(m.Deltas)+1)
	for _, b := range m.Blocks {
		keys = append(keys, b.Key)
	}
	for _, d := range m.Deltas {
		keys = append(keys, d.Key)
	}
	if m.Index != nil {
		keys = append(keys, m.Index.Graph.Key)
		for _, c := range m.Index.Chunks {
			keys = append(keys, c.Key)
		}
	}
	return keys
}
