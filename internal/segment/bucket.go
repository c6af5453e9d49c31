package segment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file:// URLs
	_ "gocloud.dev/blob/memblob"  // mem:// URLs
	"gocloud.dev/gcerrors"
)

// listPageSize is the page size of one List request to the bucket.
const listPageSize = 1000

// accessCheckTimeout bounds the check that a remote bucket answers at open
// (the SDK's retries included).
const accessCheckTimeout = 30 * time.Second

// OpenBucket opens a gocloud.dev/blob bucket by URL ("file:///abs/dir",
// "mem://", "s3://bucket?region=..."), creating a file:// directory when
// missing, and adapts it to Blobs. A file:// Put fsyncs the file and its
// directory before it returns; an s3:// PUT is durable once acknowledged.
// The closer closes the bucket.
func OpenBucket(ctx context.Context, rawURL string) (Blobs, io.Closer, error) {
	return openBucketFS(ctx, rawURL, osFS{})
}

// openBucketFS is OpenBucket with the file system file:// Puts write
// through (tests pass a double that simulates power loss).
func openBucketFS(ctx context.Context, rawURL string, fsys durableFS) (Blobs, io.Closer, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, fmt.Errorf("parse bucket url: %w", err)
	}
	if u.Scheme == "file" {
		q := u.Query()
		for k, v := range map[string]string{"create_dir": "true", "metadata": "skip", "no_tmp_dir": "true"} {
			if _, ok := q[k]; !ok {
				q.Set(k, v)
			}
		}
		u.RawQuery = q.Encode()
		// fileblob checks create_dir too; doing it here as well gives an
		// error that names the directory.
		if dir := fileURLDir(u); dir != "" {
			if err := os.MkdirAll(dir, 0o777); err != nil {
				return nil, nil, fmt.Errorf("create bucket directory: %w", err)
			}
		}
	}
	b, err := blob.OpenBucket(ctx, u.String())
	if err != nil {
		return nil, nil, fmt.Errorf("open bucket %s: %w", redactURL(u), err)
	}
	if u.Scheme != "file" && u.Scheme != "mem" {
		// A remote bucket is checked at once (HeadBucket on S3), so that a
		// wrong name, endpoint or credentials stop the start with a clear
		// error instead of failing the first compaction.
		cctx, cancel := context.WithTimeout(ctx, accessCheckTimeout)
		defer cancel()
		ok, err := b.IsAccessible(cctx)
		if err == nil && !ok {
			err = errors.New("the bucket does not exist or these credentials may not read it")
		}
		if err != nil {
			_ = b.Close()
			return nil, nil, fmt.Errorf("open bucket %s: %w", redactURL(u), err)
		}
	}
	if u.Scheme == "file" {
		if dir := fileURLDir(u); dir != "" {
			abs, err := filepath.Abs(dir)
			if err != nil {
				_ = b.Close()
				return nil, nil, fmt.Errorf("open bucket %s: %w", redactURL(u), err)
			}
			return &fileBlobs{bucketBlobs: bucketBlobs{b: b}, files: newDurableFiles(abs, fsys)}, b, nil
		}
	}
	// S3: a PUT is durable once acknowledged. mem://: nothing to make
	// durable.
	return &bucketBlobs{b: b}, b, nil
}

// fileBlobs is a file:// bucket whose Puts are durable when they return
// (see durableFiles) and whose List skips files that vanish while it walks;
// Get and Delete are fileblob's.
type fileBlobs struct {
	bucketBlobs
	files *durableFiles
}

// List returns the blobs under prefix, sorted by key, walking the
// directories under the root itself: fileblob's listing stats every entry
// it reads and fails the whole listing when one is gone by then (a
// concurrent Put's temporary file renamed, a Delete), which a collection
// being compacted while GC lists it meets all the time. A file that
// vanishes during the walk is left out, as a listing a moment later would;
// temporary files still there are listed (GC collects those a crash left).
// Files fileblob keeps attributes in (*.attrs) are not blobs. Errors: ctx's,
// and the file system's other than a file or directory gone, naming the
// path.
func (b *fileBlobs) List(ctx context.Context, prefix string) ([]BlobInfo, error) {
	root := b.files.root
	dir := filepath.Join(root, filepath.FromSlash(prefix[:strings.LastIndex(prefix, "/")+1]))
	var out []BlobInfo
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // gone meanwhile (or no blob under prefix yet)
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) || strings.HasSuffix(key, ".attrs") {
			return nil
		}
		info, err := d.Info()
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		}
		out = append(out, BlobInfo{Key: key, Size: info.Size(), ModTime: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	slices.SortFunc(out, func(a, b BlobInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Put writes data at key durably: a crash or power loss after Put returns
// leaves the whole blob at key.
func (b *fileBlobs) Put(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := b.files.put(key, data, true); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// putDeferred: see deferredSyncer.
func (b *fileBlobs) putDeferred(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := b.files.put(key, data, false); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// syncNames: see deferredSyncer.
func (b *fileBlobs) syncNames(ctx context.Context, keys []string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sync %d blobs: %w", len(keys), err)
	}
	if err := b.files.syncNames(keys); err != nil {
		return fmt.Errorf("sync %d blobs: %w", len(keys), err)
	}
	return nil
}

// deferredSyncer is implemented by blob stores where making a blob's name
// durable costs apart from its content (file://: a directory fsync), so
// that a Writer pays it once for all its blocks instead of once per block.
type deferredSyncer interface {
	// putDeferred writes like Put, but the blob is durable only after a
	// syncNames call that covers its key returned.
	putDeferred(ctx context.Context, key string, data []byte) error
	// syncNames makes every blob of keys durable.
	syncNames(ctx context.Context, keys []string) error
}

// fileURLDir returns the directory a file:// URL names, as fileblob reads it.
func fileURLDir(u *url.URL) string {
	p := u.Path
	if u.Host == "." || os.PathSeparator != '/' {
		p = strings.TrimPrefix(p, "/")
	}
	if p == "" {
		return ""
	}
	return filepath.FromSlash(p)
}

// redactURL drops the query (which may hold credentials or key paths) from
// an error message.
func redactURL(u *url.URL) string {
	c := *u
	c.RawQuery = ""
	c.User = nil
	return c.String()
}

// bucketBlobs adapts a gocloud.dev/blob bucket to Blobs.
type bucketBlobs struct {
	b *blob.Bucket
}

func contentType(key string) string {
	switch {
	case strings.HasSuffix(key, ".parquet"):
		return "application/vnd.apache.parquet"
	case strings.HasSuffix(key, ".json"):
		return "application/json"
	}
	return "application/octet-stream"
}

// Put writes data at key. It writes through a blob.Writer rather than
// Bucket.WriteAll, which computes the content's MD5 and then hashes it again
// while writing, only to compare the two in memory (S3 checks the upload
// with the SDK's own checksum).
func (b *bucketBlobs) Put(ctx context.Context, key string, data []byte) error {
	w, err := b.b.NewWriter(ctx, key, &blob.WriterOptions{ContentType: contentType(key)})
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if _, err := w.Write(data); err != nil {
		_ = w.Close()
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// Get reads the blob into one buffer of the size the bucket reports
// (Bucket.ReadAll's io.ReadAll grows its buffer by doubling: a dozen
// allocations, copies and cleared pages for a block of 1 MiB). A blob
// longer than reported is still read whole.
func (b *bucketBlobs) Get(ctx context.Context, key string) ([]byte, error) {
	return b.GetBuffer(ctx, key, nil)
}

// GetBuffer implements BufferGetter: the blob is read into buf's memory
// when its capacity holds the blob (its size as the bucket reports it, and
// bytes.MinRead more), else into a new buffer of that size.
func (b *bucketBlobs) GetBuffer(ctx context.Context, key string, buf []byte) ([]byte, error) {
	r, err := b.b.NewReader(ctx, key, nil)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, fmt.Errorf("get %s: %w", key, ErrNotExist)
		}
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	defer r.Close()
	out := bytes.NewBuffer(buf[:0])
	if size := r.Size(); size > 0 && size < maxSizedGet {
		out.Grow(int(size) + bytes.MinRead) // ReadFrom grows when fewer than MinRead bytes are free
	}
	if _, err := out.ReadFrom(r); err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, fmt.Errorf("get %s: %w", key, ErrNotExist)
		}
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return out.Bytes(), nil
}

// maxSizedGet bounds the buffer Get allocates up front from the size the
// bucket reports: a larger blob is read with growth as it arrives.
const maxSizedGet = 1 << 30

func (b *bucketBlobs) Delete(ctx context.Context, key string) error {
	if err := b.b.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

func (b *bucketBlobs) List(ctx context.Context, prefix string) ([]BlobInfo, error) {
	var out []BlobInfo
	token := blob.FirstPageToken
	for {
		// Local drivers (file://, mem://) do not look at ctx themselves.
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, err)
		}
		objs, next, err := b.b.ListPage(ctx, token, listPageSize, &blob.ListOptions{Prefix: prefix})
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, err)
		}
		for _, o := range objs {
			if o.IsDir {
				continue
			}
			out = append(out, BlobInfo{Key: o.Key, Size: o.Size, ModTime: o.ModTime})
		}
		if len(next) == 0 {
			break
		}
		token = next
	}
	slices.SortFunc(out, func(a, b BlobInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}
