package raftgroups

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/lni/dragonboat/v4/logger"
)

var loggerOnce sync.Once

// installDragonboatLogger routes dragonboat's logs into slog. Dragonboat logs
// every election step as a warning and routine progress as info, so its
// warnings become info and its info becomes debug; errors keep their level.
// Lines below least are dropped whatever log's level (Config.
// DragonboatLogLevel): a fresh node's boot says what queen did, not how
// dragonboat elected it. Everything an operator must act on, queen logs
// itself. The factory is process-wide, hence the Once.
func installDragonboatLogger(log *slog.Logger, least slog.Level) {
	loggerOnce.Do(func() {
		logger.SetLoggerFactory(func(pkg string) logger.ILogger {
			return &dbLogger{log: log.With("component", "dragonboat/"+pkg), least: least}
		})
	})
}

type dbLogger struct {
	log   *slog.Logger
	least slog.Level
}

func (l *dbLogger) SetLevel(logger.LogLevel) {}

func (l *dbLogger) emit(level slog.Level, format string, args []interface{}) {
	if level >= l.least && l.log.Enabled(context.Background(), level) {
		l.log.Log(context.Background(), level, fmt.Sprintf(format, args...))
	}
}

func (l *dbLogger) Debugf(format string, args ...interface{}) {
	l.emit(slog.LevelDebug-4, format, args)
}
func (l *dbLogger) Infof(format string, args ...interface{}) { l.emit(slog.LevelDebug, format, args) }
func (l *dbLogger) Warningf(format string, args ...interface{}) {
	l.emit(slog.LevelInfo, format, args)
}
func (l *dbLogger) Errorf(format string, args ...interface{}) { l.emit(slog.LevelError, format, args) }
func (l *dbLogger) Panicf(format string, args ...interface{}) {
	msg := fmt.Sprintf(format, args...)
	l.log.Error(msg)
	panic(msg)
}
