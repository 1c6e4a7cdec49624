package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Errors that end a connection because its byte stream cannot be trusted.
var (
	errMalformedFrame = errors.New("kafka: malformed request")
	errUnknownKey     = errors.New("kafka: API key not served")
	errFrameTooLarge  = errors.New("kafka: request frame too large")
)

// keyApiVersions and the SASL keys are the only ones a connection may send
// before it authenticates.
const (
	keyProduce          int16 = 0
	keySaslHandshake    int16 = 17
	keyApiVersions      int16 = 18
	keySaslAuthenticate int16 = 36
)

// RequestHeader is the header of the request a handler is serving; see
// RequestHeaderFromContext.
type RequestHeader struct {
	Key           int16
	Version       int16
	CorrelationID int32
	// ClientID is the client.id the client sent ("" when null).
	ClientID string
}

type requestHeaderKey struct{}

// RequestHeaderFromContext returns the header of the request whose handler
// received ctx (for the client id, or for logging the correlation id).
func RequestHeaderFromContext(ctx context.Context) (RequestHeader, bool) {
	h, ok := ctx.Value(requestHeaderKey{}).(RequestHeader)
	return h, ok
}

// decodedRequest is a request frame after decoding.
type decodedRequest struct {
	hdr RequestHeader
	// inWindow is false when the version is outside supportedVersions;
	// the request then gets UNSUPPORTED_VERSION instead of its handler.
	inWindow bool
	// req is the decoded body. It is nil for an out-of-window ApiVersions,
	// whose body is never parsed (its layout may be from the future).
	req kmsg.Request
}

// decodeRequest parses a request frame (the bytes after the size prefix):
// the header, tagged fields included for flexible versions, then the body
// with kmsg. It fails for unknown keys, for versions kmsg cannot decode, and
// for anything malformed; the connection is closed then.
func decodeRequest(frame []byte) (decodedRequest, error) {
	var d decodedRequest
	if len(frame) < 8 {
		return d, fmt.Errorf("%w: %d byte frame is shorter than a request header", errMalformedFrame, len(frame))
	}
	d.hdr.Key = int16(binary.BigEndian.Uint16(frame[0:]))
	d.hdr.Version = int16(binary.BigEndian.Uint16(frame[2:]))
	d.hdr.CorrelationID = int32(binary.BigEndian.Uint32(frame[4:]))
	window, known := SupportedVersions(d.hdr.Key)
	if !known {
		return d, fmt.Errorf("%w: key %d", errUnknownKey, d.hdr.Key)
	}
	d.inWindow = window.Contains(d.hdr.Version)
	if d.hdr.Key == keyApiVersions && !d.inWindow {
		// Answered with the v0 layout, whatever the request held.
		return d, nil
	}
	req := kmsg.RequestForKey(d.hdr.Key)
	if d.hdr.Version < 0 || d.hdr.Version > req.MaxVersion() {
		return d, fmt.Errorf("%w: %s v%d is beyond what can be decoded (max v%d)",
			errMalformedFrame, KeyName(d.hdr.Key), d.hdr.Version, req.MaxVersion())
	}
	req.SetVersion(d.hdr.Version)
	body, clientID, err := parseHeaderTail(frame[8:], req.IsFlexible())
	if err != nil {
		return d, fmt.Errorf("%w: %s v%d header: %w", errMalformedFrame, KeyName(d.hdr.Key), d.hdr.Version, err)
	}
	d.hdr.ClientID = clientID
	if err := req.ReadFrom(body); err != nil {
		return d, fmt.Errorf("%w: %s v%d body: %w", errMalformedFrame, KeyName(d.hdr.Key), d.hdr.Version, err)
	}
	d.req = req
	return d, nil
}

// parseHeaderTail reads the nullable client id (always a classic int16
// string, even in flexible headers) and, for flexible versions, the header's
// tagged fields. It returns the body that follows.
func parseHeaderTail(b []byte, flexible bool) (body []byte, clientID string, err error) {
	if len(b) < 2 {
		return nil, "", errors.New("truncated client id")
	}
	n := int16(binary.BigEndian.Uint16(b))
	b = b[2:]
	switch {
	case n == -1:
	case n < 0 || int(n) > len(b):
		return nil, "", fmt.Errorf("client id length %d with %d bytes left", n, len(b))
	default:
		clientID = string(b[:n])
		b = b[n:]
	}
	if !flexible {
		return b, clientID, nil
	}
	count, b, err := uvarint(b)
	if err != nil {
		return nil, "", fmt.Errorf("tag count: %w", err)
	}
	if count > uint64(len(b)/2) { // a tag is at least a key byte and a size byte
		return nil, "", fmt.Errorf("%d tagged fields in %d bytes", count, len(b))
	}
	for range count {
		if _, b, err = uvarint(b); err != nil {
			return nil, "", fmt.Errorf("tag key: %w", err)
		}
		var size uint64
		if size, b, err = uvarint(b); err != nil {
			return nil, "", fmt.Errorf("tag size: %w", err)
		}
		if size > uint64(len(b)) {
			return nil, "", fmt.Errorf("tag of %d bytes with %d left", size, len(b))
		}
		b = b[size:] // header tags carry nothing queen uses
	}
	return b, clientID, nil
}

func uvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || v > math.MaxUint32 {
		return 0, nil, errors.New("bad uvarint")
	}
	return v, b[n:], nil
}

// appendResponseFrame appends a whole response frame: size, correlation id,
// the header's tagged fields when the response is flexible (never for
// ApiVersions, whose response header stays v0 so any client can read it),
// then the body.
func appendResponseFrame(dst []byte, correlationID int32, resp kmsg.Response) ([]byte, error) {
	if dst == nil {
		dst = getFrame(responseSizeHint(resp))
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != keyApiVersions {
		dst = append(dst, 0) // no header tags
	}
	dst = resp.AppendTo(dst)
	size := len(dst) - start - 4
	if size > math.MaxInt32 {
		return dst[:start], fmt.Errorf("kafka: %s response of %d bytes does not fit a frame", KeyName(resp.Key()), size)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(size))
	return dst, nil
}

// responseSizeHint sizes a fetch response's frame up front: its record
// batches are most of it, and growing the buffer by doubling while kmsg
// appends them copied every byte about twice more.
func responseSizeHint(resp kmsg.Response) int {
	const small = 256
	fr, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return small
	}
	n := small
	for i := range fr.Topics {
		t := &fr.Topics[i]
		n += len(t.Topic) + 16
		for j := range t.Partitions {
			n += len(t.Partitions[j].RecordBatches) + 64 + 16*len(t.Partitions[j].AbortedTransactions)
		}
	}
	return n
}
