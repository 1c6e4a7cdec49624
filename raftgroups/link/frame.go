// Package link is the standby link: the read-only routes a source cluster
// serves on every raft group's listener under /link/v1/ (behind
// QUEEN_LINK_TOKEN, checked by raftgroups/transport before a handler
// runs), and the client a standby reads them with. The protocol is in
// docs/standby.md ("The link protocol").
//
// A source serves a group's committed entries, each as the state machine's
// Update receives it (dragonboat's entry encoding undone here), and a
// consistent copy of the group's store at an applied index when the
// entries a standby needs are compacted away.
package link

import (
	"encoding/binary"
	"errors"
	"fmt"

	pb "github.com/lni/dragonboat/v4/raftpb"

	"github.com/queen-mq/queen/wire"
)

// Entry is one committed entry of a source group.
type Entry struct {
	Index uint64
	// StampMs is the entry's clock stamp (wire entry header: the leader's
	// replicated clock when it proposed it), 0 for a skipped entry.
	StampMs uint64
	// Skip marks an entry the state machine does not apply (a membership
	// change, raft's empty entry, a session or metadata entry): it only
	// holds its index.
	Skip bool
	// Payload is the entry's command bytes exactly as the source's state
	// machine applied them (wire.ParseEntry reads them).
	Payload []byte
}

// Frame kinds on the wire.
const (
	frameApply = 0
	frameSkip  = 1
)

// maxPayload bounds one entry's payload a client accepts: dragonboat
// refuses proposals larger than this.
const maxPayload = 256 << 20

// appendFrame appends e as `uvarint index | uvarint stampMs | kind |
// uvarint len | payload`.
func appendFrame(b []byte, e Entry) []byte {
	b = binary.AppendUvarint(b, e.Index)
	b = binary.AppendUvarint(b, e.StampMs)
	if e.Skip {
		return binary.AppendUvarint(append(b, frameSkip), 0)
	}
	b = append(b, frameApply)
	b = binary.AppendUvarint(b, uint64(len(e.Payload)))
	return append(b, e.Payload...)
}

// errFrame is a malformed entries body.
var errFrame = errors.New("link: malformed entries frame")

// parseFrames decodes an entries body.
func parseFrames(b []byte) ([]Entry, error) {
	var out []Entry
	for len(b) > 0 {
		var e Entry
		var n int
		if e.Index, n = binary.Uvarint(b); n <= 0 {
			return nil, errFrame
		}
		b = b[n:]
		if e.StampMs, n = binary.Uvarint(b); n <= 0 {
			return nil, errFrame
		}
		b = b[n:]
		if len(b) == 0 || b[0] > frameSkip {
			return nil, errFrame
		}
		e.Skip = b[0] == frameSkip
		b = b[1:]
		l, n := binary.Uvarint(b)
		if n <= 0 || l > maxPayload || l > uint64(len(b)-n) {
			return nil, errFrame
		}
		b = b[n:]
		if !e.Skip {
			e.Payload = b[:l:l]
		}
		b = b[l:]
		if len(out) > 0 && e.Index != out[len(out)-1].Index+1 {
			return nil, fmt.Errorf("%w: index %d after %d", errFrame, e.Index, out[len(out)-1].Index)
		}
		out = append(out, e)
	}
	return out, nil
}

// Dragonboat's encoded entry header (internal/rsm/encoded.go, which is
// internal and so reimplemented here): one byte, version in the high
// nibble, compression in bits 1-3, a session flag in bit 0; version 0
// without compression is the header then the payload. Queen configures
// no entry compression, so a compressed entry is an error, never a guess.
const (
	eeVersionMask  = 0xf0
	eeCompressMask = 0x0e
	eeSessionMask  = 0x01
)

// toEntry turns a raft log entry into what the link serves: the payload
// the state machine's Update receives, or a skip.
func toEntry(e pb.Entry) (Entry, error) {
	out := Entry{Index: e.Index}
	// Mirrors dragonboat's handleEntry: config changes, empty entries and
	// session registrations never reach Update; metadata entries carry
	// none of ours.
	switch {
	case e.Type == pb.ConfigChangeEntry, e.Type == pb.MetadataEntry,
		!e.IsSessionManaged(), e.IsNewSessionRequest(), e.IsEndOfSessionRequest(), len(e.Cmd) == 0:
		out.Skip = true
		return out, nil
	}
	switch e.Type {
	case pb.ApplicationEntry:
		out.Payload = e.Cmd
	case pb.EncodedEntry:
		h := e.Cmd[0]
		if h&eeVersionMask != 0 || h&eeSessionMask != 0 || h&eeCompressMask != 0 {
			return Entry{}, fmt.Errorf("link: entry %d: unsupported dragonboat encoding header %#x", e.Index, h)
		}
		out.Payload = e.Cmd[1:]
	default:
		out.Skip = true
		return out, nil
	}
	if len(out.Payload) == 0 {
		out.Skip = true
		out.Payload = nil
		return out, nil
	}
	// The stamp is read from the entry's header only; a payload that is
	// not a queen entry still travels (the standby applies it as the
	// source did, refusing it alike).
	if pe, err := wire.ParseEntry(out.Payload); err == nil && pe.NowMs > 0 {
		out.StampMs = uint64(pe.NowMs)
	}
	return out, nil
}
