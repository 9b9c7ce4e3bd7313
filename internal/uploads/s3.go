package uploads

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/tether-dev/tether/internal/task"
)

// S3 keeps blobs in a bucket of an S3-compatible object store (AWS S3,
// MinIO, versitygw, Cloudflare R2, ...), so several gateways share them
// with nothing else in common but Postgres.
//
// Objects cannot be appended to, so a blob is a set of parts: each Write
// stores what it is given as objects <prefix><id>/<start>-<end> (offsets
// zero-padded to 20 digits, at most a segment of 8 MiB each), and Create
// stores the empty part 0-0 that says the blob exists. The blob's bytes
// are read from the parts in order of start: each part gives its bytes up
// to where the next part starts (a later write at an offset replaces what
// was there), the last one all of its bytes. Open does that with ranged
// GETs; Delete removes every object under <prefix><id>/.
//
// Two gateways may write the same upload at once (a client that gave up on
// one and resumed through another); Postgres's conditional advance of the
// offset decides whose bytes are recorded, and nothing here may undo that.
// So a Write never deletes or changes another part: a stale writer's part
// (written at an offset that was recorded before the winner's part at the
// same start) is only ever an extra candidate. Where several parts start
// at the same offset, the one read is one that reaches the next part's
// start (a stale part that stops short leaves a hole and is passed over),
// and of those the longest. Every part of one upload carries the client's
// bytes for its range, so candidates that both fit hold the same bytes,
// and the recorded chain of parts is always one that fits. The price: an
// unrecorded part longer than its replacement stays visible past the
// replacement's end until later writes cover it. That is never observed,
// because bytes are only read once the recorded offset is the size, which
// no part passes.
//
// A Write also refuses (conflict) when a part starts after its offset:
// parts are only written at offsets Postgres had recorded, and recorded
// offsets only grow, so such a writer is stale.
type S3 struct {
	client *s3.Client
	bucket string
	prefix string
}

var _ Blobs = (*S3)(nil)

// S3Config names the bucket and how to reach it.
type S3Config struct {
	// Bucket is required.
	Bucket string
	// Endpoint is the store's URL (http://127.0.0.1:9000,
	// https://<account>.r2.cloudflarestorage.com); empty means AWS.
	Endpoint string
	// Region; empty means AWS_REGION or the AWS profile's, else us-east-1.
	Region string
	// Prefix is put before every key, e.g. "uploads/".
	Prefix string
	// PathStyle addresses the bucket in the path (endpoint/bucket/key)
	// rather than the host name, as most stores other than AWS need.
	PathStyle bool
	// Credentials; nil means the usual AWS chain (AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY, AWS_PROFILE, a role, ...).
	Credentials aws.CredentialsProvider
}

// NewS3 makes the store; it does not contact the bucket (Check does).
func NewS3(ctx context.Context, cfg S3Config) (*S3, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("uploads: no S3 bucket given")
	}
	var opts []func(*awsconfig.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	if cfg.Credentials != nil {
		opts = append(opts, awsconfig.WithCredentialsProvider(cfg.Credentials))
	}
	ac, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("uploads: AWS configuration: %w", err)
	}
	ac.Region = cmp.Or(ac.Region, "us-east-1")
	client := s3.NewFromConfig(ac, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		// A store that is away answers unavailable within a few seconds,
		// not the SDK's default of up to 20 s between tries.
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) { so.MaxBackoff = time.Second })
		// Checksums only where S3 requires them: not every compatible
		// store reads the trailing checksums the SDK sends by default.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &S3{client: client, bucket: cfg.Bucket, prefix: cfg.Prefix}, nil
}

// Check asks once whether the bucket can be reached with these credentials.
func (b *S3) Check(ctx context.Context) error {
	_, err := b.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(b.bucket)})
	if err != nil {
		return b.fail("reach bucket "+b.bucket, err)
	}
	return nil
}

// part is one object of a blob.
type part struct {
	key        string
	start, end int64
}

func (b *S3) dir(id string) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	return b.prefix + id + "/", nil
}

func partKey(dir string, start, end int64) string {
	return fmt.Sprintf("%s%020d-%020d", dir, start, end)
}

func (b *S3) Create(ctx context.Context, id string) error {
	dir, err := b.dir(id)
	if err != nil {
		return err
	}
	if err := b.deleteAll(ctx, dir); err != nil {
		return fmt.Errorf("create blob %s: %w", id, err)
	}
	if err := b.put(ctx, partKey(dir, 0, 0), nil); err != nil {
		return fmt.Errorf("create blob %s: %w", id, err)
	}
	return nil
}

func (b *S3) Write(ctx context.Context, id string, offset int64, r io.Reader) (int64, error) {
	dir, err := b.dir(id)
	if err != nil {
		return 0, err
	}
	parts, err := b.list(ctx, dir)
	if err != nil {
		return 0, fmt.Errorf("write blob %s: %w", id, err)
	}
	if len(parts) == 0 {
		return 0, fmt.Errorf("write blob %s: %w", id, fs.ErrNotExist)
	}
	for _, p := range parts {
		if p.start > offset {
			return 0, task.Errorf(task.CodeConflict, "upload offset moved on: another request wrote at %d", p.start)
		}
	}
	if size := length(resolve(parts)); size < offset {
		return 0, fmt.Errorf("write blob %s: it holds %d bytes, fewer than the offset %d", id, size, offset)
	}
	var written int64
	bp := partBuffers.Get().(*[]byte)
	defer partBuffers.Put(bp)
	buf := *bp
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			at := offset + written
			if err := b.put(ctx, partKey(dir, at, at+int64(n)), buf[:n]); err != nil {
				return written, fmt.Errorf("write blob %s: %w", id, err)
			}
			written += int64(n)
		}
		switch {
		case rerr == io.EOF || rerr == io.ErrUnexpectedEOF:
			return written, nil
		case rerr != nil:
			return written, fmt.Errorf("write blob %s: %w", id, rerr)
		}
	}
}

// partBuffers hold a part while it is stored: S3 wants its length first.
var partBuffers = sync.Pool{New: func() any { b := make([]byte, segment); return &b }}

func (b *S3) Open(ctx context.Context, id string) (io.ReadSeekCloser, error) {
	dir, err := b.dir(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", fs.ErrNotExist, err)
	}
	parts, err := b.list(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("open blob %s: %w", id, err)
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("open blob %s: %w", id, fs.ErrNotExist)
	}
	spans := resolve(parts)
	return &s3Reader{b: b, ctx: ctx, id: id, spans: spans, size: length(spans)}, nil
}

func (b *S3) Delete(ctx context.Context, id string) error {
	dir, err := b.dir(id)
	if err != nil {
		return err
	}
	if err := b.deleteAll(ctx, dir); err != nil {
		return fmt.Errorf("delete blob %s: %w", id, err)
	}
	return nil
}

func (b *S3) deleteAll(ctx context.Context, dir string) error {
	parts, err := b.list(ctx, dir)
	if err != nil {
		return err
	}
	for _, p := range parts {
		_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(p.key)})
		if err != nil {
			return b.fail("delete "+p.key, err)
		}
	}
	return nil
}

func (b *S3) put(ctx context.Context, key string, data []byte) error {
	_, err := b.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(b.bucket), Key: aws.String(key),
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		return b.fail("put "+key, err)
	}
	return nil
}

// list reads the parts under dir, in order of start, then end. Objects
// that are not parts are ignored.
func (b *S3) list(ctx context.Context, dir string) ([]part, error) {
	var parts []part
	pages := s3.NewListObjectsV2Paginator(b.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(b.bucket), Prefix: aws.String(dir)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, b.fail("list "+dir, err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			start, end, ok := parsePart(strings.TrimPrefix(key, dir))
			if ok {
				parts = append(parts, part{key: key, start: start, end: end})
			}
		}
	}
	slices.SortFunc(parts, func(x, y part) int {
		return cmp.Or(cmp.Compare(x.start, y.start), cmp.Compare(x.end, y.end))
	})
	return parts, nil
}

func parsePart(name string) (start, end int64, ok bool) {
	s, e, found := strings.Cut(name, "-")
	if !found || len(s) != 20 || len(e) != 20 {
		return 0, 0, false
	}
	start, err1 := strconv.ParseInt(s, 10, 64)
	end, err2 := strconv.ParseInt(e, 10, 64)
	if err1 != nil || err2 != nil || start < 0 || end < start {
		return 0, 0, false
	}
	return start, end, true
}

// span is the bytes [from, to) of the blob, read from part key at from-start.
type span struct {
	key             string
	start, from, to int64
}

// resolve picks, from parts sorted by start, the part read at each start
// (see S3) and returns the blob as spans in order. It stops at a hole.
func resolve(parts []part) []span {
	var spans []span
	var pos int64
	for i := 0; i < len(parts); {
		start := parts[i].start
		j := i
		for j < len(parts) && parts[j].start == start {
			j++
		}
		if start > pos {
			break // a hole: nothing reaches this start
		}
		same := parts[i:j]
		next := int64(-1)
		if j < len(parts) {
			next = parts[j].start
		}
		// The longest part (sorted by end, it is the last) is read unless
		// none reaches the next start; a shorter one never reaches further.
		p := same[len(same)-1]
		to := p.end
		if next >= 0 && next <= p.end {
			to = next
		}
		if to > start {
			spans = append(spans, span{key: p.key, start: p.start, from: start, to: to})
		}
		pos = max(pos, to)
		if next < 0 || p.end < next {
			break
		}
		i = j
	}
	return spans
}

func length(spans []span) int64 {
	if len(spans) == 0 {
		return 0
	}
	return spans[len(spans)-1].to
}

// s3Reader reads a blob's spans with ranged GETs, one body at a time.
type s3Reader struct {
	b     *S3
	ctx   context.Context
	id    string
	spans []span
	size  int64
	pos   int64
	body  io.ReadCloser
	left  int64 // bytes of body still to read
}

func (r *s3Reader) Read(p []byte) (int, error) {
	if r.pos >= r.size {
		return 0, io.EOF
	}
	if r.body == nil {
		if err := r.open(); err != nil {
			return 0, err
		}
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.body.Read(p)
	r.pos += int64(n)
	r.left -= int64(n)
	if r.left == 0 {
		r.closeBody()
		if err == io.EOF {
			err = nil
		}
	}
	if err == io.EOF {
		err = fmt.Errorf("read blob %s: %w", r.id, io.ErrUnexpectedEOF)
	}
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		err = r.b.fail("read blob "+r.id, err)
	}
	return n, err
}

// open starts a GET of the rest of the span that holds pos.
func (r *s3Reader) open() error {
	i, _ := slices.BinarySearchFunc(r.spans, r.pos, func(s span, pos int64) int {
		if s.to <= pos {
			return -1
		}
		if s.from > pos {
			return 1
		}
		return 0
	})
	s := r.spans[i]
	first, last := r.pos-s.start, s.to-1-s.start
	out, err := r.b.client.GetObject(r.ctx, &s3.GetObjectInput{
		Bucket: aws.String(r.b.bucket), Key: aws.String(s.key),
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", first, last)),
	})
	if err != nil {
		return r.b.fail("read blob "+r.id, err)
	}
	r.body, r.left = out.Body, last-first+1
	return nil
}

func (r *s3Reader) closeBody() {
	if r.body != nil {
		_ = r.body.Close()
		r.body, r.left = nil, 0
	}
}

func (r *s3Reader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += r.pos
	case io.SeekEnd:
		offset += r.size
	}
	if offset < 0 {
		return r.pos, fmt.Errorf("seek blob %s: negative position", r.id)
	}
	if offset != r.pos {
		r.closeBody()
		r.pos = offset
	}
	return r.pos, nil
}

func (r *s3Reader) Close() error {
	r.closeBody()
	return nil
}

// fail wraps an error of the store: one that did not come back as a
// client error (no answer, a timeout, a 5xx) means the store is away for
// now, unavailable; a 4xx (no such bucket, access denied) is a fault of
// the setup, internal.
func (b *S3) fail(what string, err error) error {
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", what, err)
	}
	var re *smithyhttp.ResponseError
	// The SDK reports a request that got no answer as a response error
	// with status 0.
	if errors.As(err, &re) && re.HTTPStatusCode() >= 400 && re.HTTPStatusCode() < 500 {
		return fmt.Errorf("s3 %s: %w", what, err)
	}
	return task.Unavailable("upload storage", fmt.Errorf("s3 %s: %w", what, err))
}
