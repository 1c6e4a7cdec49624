package raftgroups

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// Dragonboat's warnings are election chatter (logged as info) and its info
// is routine (debug); below the least level nothing of it is written,
// whatever the logger would take.
func TestDragonboatLinesBelowTheLeastLevelAreDropped(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	quiet := &dbLogger{log: log, least: slog.LevelWarn}
	quiet.Infof("became leader")
	quiet.Warningf("became PreVote candidate")
	quiet.Errorf("disk %s failed", "x")
	if out := buf.String(); strings.Contains(out, "became") || !strings.Contains(out, "level=ERROR msg=\"disk x failed\"") {
		t.Fatalf("at least WARN:\n%s", out)
	}
	buf.Reset()
	verbose := &dbLogger{log: log, least: slog.LevelDebug}
	verbose.Infof("became leader")
	verbose.Warningf("became PreVote candidate")
	if out := buf.String(); !strings.Contains(out, "level=DEBUG msg=\"became leader\"") || !strings.Contains(out, "level=INFO msg=\"became PreVote candidate\"") {
		t.Fatalf("at least DEBUG:\n%s", out)
	}
}
