package proxy

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/queen-mq/queen/kafka/logbound"
)

// maxLoggedTransportError is how much of one fasthttp message is logged.
const maxLoggedTransportError = 256

// transportLog is the proxy port's fasthttp logger. Its messages are about
// requests fasthttp could not read (a header line without a colon, bytes
// that are no HTTP), which a client sends as fast as it can connect, and
// fasthttp quotes the client's bytes in them, credentials included. So at
// most one line a second gets through (logbound.Gate, as the Kafka port's
// refused logins), saying how many were held back before it; every quoted
// client text is replaced by its size; and the line is clipped.
type transportLog struct {
	log  *slog.Logger
	gate *logbound.Gate
}

func newTransportLog(log *slog.Logger) transportLog {
	return transportLog{log: log, gate: &logbound.Gate{Interval: time.Second}}
}

func (l transportLog) Printf(format string, args ...any) {
	ok, held := l.gate.Pass(time.Now())
	if !ok {
		return
	}
	l.log.Info("proxy port: "+logbound.Clip(withoutQuoted(fmt.Sprintf(format, args...)), maxLoggedTransportError),
		"lines_not_logged", held)
}

// withoutQuoted replaces every Go-quoted string in s (how fasthttp shows
// the bytes it could not parse: request lines, header names and values,
// its read buffer) with its size, leaving quoted addresses alone.
func withoutQuoted(s string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '"')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		q, err := strconv.QuotedPrefix(s[i:])
		if err != nil { // an unterminated quote: drop the rest
			b.WriteString(`"..."`)
			return b.String()
		}
		s = s[i+len(q):]
		text, _ := strconv.Unquote(q)
		if isAddr(text) {
			b.WriteString(q)
			continue
		}
		b.WriteString(`"...(` + strconv.Itoa(len(text)) + ` bytes)"`)
	}
}

// isAddr reports whether s is an ip:port, as fasthttp quotes a
// connection's two ends.
func isAddr(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return false
	}
	_, err = strconv.ParseUint(port, 10, 16)
	return err == nil && net.ParseIP(host) != nil
}
