package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// appendWriter is an io.Writer that appends to a slice; the streaming
// compressors write into the caller's buffer through it.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// Compressors are pooled with the appendWriter they write into, so a warm
// encode allocates neither.
type gzipCompressor struct {
	w   *gzip.Writer
	out appendWriter
}

type lz4Compressor struct {
	w   *lz4.Writer
	out appendWriter
}

var (
	gzipCompressors = sync.Pool{New: func() any {
		c := new(gzipCompressor)
		c.w, _ = gzip.NewWriterLevel(&c.out, gzip.DefaultCompression)
		return c
	}}
	lz4Compressors = sync.Pool{New: func() any {
		c := new(lz4Compressor)
		c.w = lz4.NewWriter(&c.out)
		// What the Java producer writes: 64 KiB independent blocks, no
		// content checksum. Every Kafka reader accepts this frame.
		_ = c.w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false), lz4.ConcurrencyOption(1))
		return c
	}}
	zstdEncoders = sync.Pool{New: func() any {
		// A small window keeps the readers' memory small; produced batches
		// are at most a few MiB, so the ratio barely changes.
		e, _ := zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(64<<10),
			zstd.WithZeroFrames(true))
		return e
	}}
)

// appendCompressed appends src compressed with codec to dst.
func appendCompressed(dst, src []byte, codec Compression) ([]byte, error) {
	switch codec {
	case CompressionNone:
		return append(dst, src...), nil
	case CompressionGzip:
		c := gzipCompressors.Get().(*gzipCompressor)
		defer gzipCompressors.Put(c)
		c.out.b = dst
		c.w.Reset(&c.out)
		if _, err := c.w.Write(src); err != nil {
			return dst, fmt.Errorf("gzip: %w", err)
		}
		if err := c.w.Close(); err != nil {
			return dst, fmt.Errorf("gzip: %w", err)
		}
		dst, c.out.b = c.out.b, nil
		return dst, nil
	case CompressionLZ4:
		c := lz4Compressors.Get().(*lz4Compressor)
		defer lz4Compressors.Put(c)
		c.out.b = dst
		c.w.Reset(&c.out)
		if _, err := c.w.Write(src); err != nil {
			return dst, fmt.Errorf("lz4: %w", err)
		}
		if err := c.w.Close(); err != nil {
			return dst, fmt.Errorf("lz4: %w", err)
		}
		dst, c.out.b = c.out.b, nil
		return dst, nil
	case CompressionSnappy:
		return appendXerial(dst, src), nil
	case CompressionZstd:
		e := zstdEncoders.Get().(*zstd.Encoder)
		defer zstdEncoders.Put(e)
		return e.EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("%w: %s", ErrUnsupportedCompression, codec)
}

// appendXerial appends src as xerial-framed snappy, the framing the Java
// client writes and every client reads. xerial.Encode only writes its header
// into an empty slice, so it gets the spare capacity of dst as one.
func appendXerial(dst, src []byte) []byte {
	const chunk = 32 << 10 // the chunk size xerial.Encode uses
	need := xerialHeaderSize
	full, rest := len(src)/chunk, len(src)%chunk
	need += full * (4 + s2.MaxEncodedLen(chunk))
	if rest > 0 {
		need += 4 + s2.MaxEncodedLen(rest)
	}
	dst = slices.Grow(dst, need)
	n := len(dst)
	out := xerial.Encode(dst[n:n], src)
	if &out[0] == &dst[n : n+1][0] {
		return dst[:n+len(out)] // encoded in place, the common case
	}
	return append(dst, out...)
}

// Decompression.

// xerialMagic starts a xerial-framed snappy payload; the framing header is
// this magic plus two int32 versions.
var xerialMagic = []byte{130, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

type gzipDecompressor struct {
	r   gzip.Reader
	src bytes.Reader
}

type lz4Decompressor struct {
	r   *lz4.Reader
	src bytes.Reader
}

var (
	gzipDecompressors = sync.Pool{New: func() any { return new(gzipDecompressor) }}
	lz4Decompressors  = sync.Pool{New: func() any { return &lz4Decompressor{r: lz4.NewReader(nil)} }}
	// zstdDecoders holds one pool per decoded-size bound, a power of two:
	// the bound is a decoder option, and rounding keeps the pools few
	// whatever limits callers pass.
	zstdDecoders sync.Map // int -> *sync.Pool of *zstd.Decoder
)

// decompress inflates src, which codec compressed, refusing to produce more
// than limit bytes. The result is freshly allocated (records alias it).
//
// zstd decoders carry their bound as an option and are pooled per bound, so
// they are built with the call's whole cap (callCap) rounded up to a power of
// two rather than what is left of it; the output is then checked against
// limit. A zstd batch can therefore transiently use up to twice callCap.
func decompress(codec Compression, src []byte, limit, callCap int) ([]byte, error) {
	switch codec {
	case CompressionGzip:
		d := gzipDecompressors.Get().(*gzipDecompressor)
		defer gzipDecompressors.Put(d)
		d.src.Reset(src)
		if err := d.r.Reset(&d.src); err != nil {
			return nil, fmt.Errorf("%w: gzip: %w", ErrCorrupt, err)
		}
		return readLimited(&d.r, len(src), limit, "gzip")
	case CompressionLZ4:
		d := lz4Decompressors.Get().(*lz4Decompressor)
		defer lz4Decompressors.Put(d)
		d.src.Reset(src)
		d.r.Reset(&d.src)
		return readLimited(d.r, len(src), limit, "lz4")
	case CompressionSnappy:
		return decompressSnappy(src, limit)
	case CompressionZstd:
		return decompressZstd(src, limit, callCap)
	}
	return nil, fmt.Errorf("%w: %s", ErrUnsupportedCompression, codec)
}

// readLimited reads r to the end into a new slice, failing with ErrTooLarge
// past limit bytes. The first allocation guesses from the compressed size so
// a bomb costs at most limit bytes.
func readLimited(r io.Reader, compressedLen, limit int, codec string) ([]byte, error) {
	guess := min(max(4*compressedLen, 512), limit+1)
	buf := bytes.NewBuffer(make([]byte, 0, guess))
	n, err := buf.ReadFrom(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, codec, err)
	}
	if n > int64(limit) {
		return nil, fmt.Errorf("%w: %s payload inflates past the %d byte limit", ErrTooLarge, codec, limit)
	}
	return buf.Bytes(), nil
}

// decompressSnappy accepts both raw snappy (librdkafka, franz-go, sarama) and
// the xerial framing (the Java client). Block headers carry their decoded
// length, so the limit is checked before anything is allocated.
func decompressSnappy(src []byte, limit int) ([]byte, error) {
	if len(src) < len(xerialMagic) || !bytes.Equal(src[:len(xerialMagic)], xerialMagic) {
		n, err := s2.DecodedLen(src)
		if err != nil {
			return nil, fmt.Errorf("%w: snappy: %w", ErrCorrupt, err)
		}
		if n > limit {
			return nil, fmt.Errorf("%w: snappy payload declares %d bytes, over the %d byte limit", ErrTooLarge, n, limit)
		}
		out, err := s2.Decode(make([]byte, n), src)
		if err != nil {
			return nil, fmt.Errorf("%w: snappy: %w", ErrCorrupt, err)
		}
		return out, nil
	}
	// Walk the chunk headers first: it validates the framing and sums the
	// decoded size, so the output is allocated once and never past limit.
	if len(src) < xerialHeaderSize {
		return nil, fmt.Errorf("%w: snappy: truncated xerial header", ErrCorrupt)
	}
	total := 0
	for rest := src[xerialHeaderSize:]; len(rest) > 0; {
		if len(rest) < 4 {
			return nil, fmt.Errorf("%w: snappy: truncated xerial chunk length", ErrCorrupt)
		}
		size := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(size) > uint64(len(rest)) {
			return nil, fmt.Errorf("%w: snappy: xerial chunk of %d bytes overruns the payload", ErrCorrupt, size)
		}
		n, err := s2.DecodedLen(rest[:size])
		if err != nil {
			return nil, fmt.Errorf("%w: snappy: %w", ErrCorrupt, err)
		}
		if total += n; total > limit {
			return nil, fmt.Errorf("%w: snappy payload inflates past the %d byte limit", ErrTooLarge, limit)
		}
		rest = rest[size:]
	}
	out, err := xerial.DecodeCapped(make([]byte, 0, total), src)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %w", ErrCorrupt, err)
	}
	return out, nil
}

// decompressZstd uses the decoder's memory bound: it refuses a frame whose
// declared size is over the bound before allocating, and stops a frame that
// grows past it while decoding.
func decompressZstd(src []byte, limit, callCap int) ([]byte, error) {
	pool := zstdDecoderPool(1 << bits.Len(uint(max(limit, callCap)-1)))
	d, ok := pool.Get().(*zstd.Decoder)
	if !ok {
		return nil, fmt.Errorf("%w: zstd: no decoder for a %d byte limit", ErrTooLarge, callCap)
	}
	defer pool.Put(d)
	out, err := d.DecodeAll(src, nil)
	switch {
	case err == nil:
	case isZstdTooLarge(err):
		return nil, fmt.Errorf("%w: zstd payload inflates past the %d byte limit: %w", ErrTooLarge, limit, err)
	default:
		return nil, fmt.Errorf("%w: zstd: %w", ErrCorrupt, err)
	}
	if len(out) > limit {
		return nil, fmt.Errorf("%w: zstd payload inflates past the %d byte limit", ErrTooLarge, limit)
	}
	return out, nil
}

func isZstdTooLarge(err error) bool {
	return errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded)
}

func zstdDecoderPool(limit int) *sync.Pool {
	if p, ok := zstdDecoders.Load(limit); ok {
		return p.(*sync.Pool)
	}
	p := &sync.Pool{New: func() any {
		d, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(uint64(limit)))
		if err != nil {
			return nil // only an invalid limit gets here; decompressZstd reports it
		}
		return d
	}}
	actual, _ := zstdDecoders.LoadOrStore(limit, p)
	return actual.(*sync.Pool)
}
