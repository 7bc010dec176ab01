package devserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	"go.uber.org/zap/zapcore"
)

// slogLogger adapts the Temporal server's log.Logger interface to *slog.Logger.
// The server logs a lot at Info (every service start, shard movement, ...), so
// records below level are dropped before they reach the handler.
type slogLogger struct {
	log   *slog.Logger
	level slog.Leveler
	// fatalPanics and stopping are shared by every logger derived with With.
	// While fatalPanics is set, Fatal panics instead of only logging; see Fatal.
	fatalPanics *atomic.Bool
	// stopping is set once Stop begins. Shutting down makes every internal
	// poller and client complain (lost connections, canceled contexts); none
	// of it is actionable, so only real errors get through from then on.
	stopping *atomic.Bool
}

var (
	_ log.Logger     = slogLogger{}
	_ log.WithLogger = slogLogger{}
)

func newSlogLogger(l *slog.Logger, level slog.Leveler) slogLogger {
	return slogLogger{log: l, level: level, fatalPanics: new(atomic.Bool), stopping: new(atomic.Bool)}
}

// Debug logs at debug level.
func (l slogLogger) Debug(msg string, tags ...tag.Tag) { l.emit(slog.LevelDebug, msg, tags) }

// Info logs at info level.
func (l slogLogger) Info(msg string, tags ...tag.Tag) { l.emit(slog.LevelInfo, msg, tags) }

// Warn logs at warn level.
func (l slogLogger) Warn(msg string, tags ...tag.Tag) { l.emit(slog.LevelWarn, msg, tags) }

// Error logs at error level.
func (l slogLogger) Error(msg string, tags ...tag.Tag) { l.emit(slog.LevelError, msg, tags) }

// DPanic logs at error level; like zap in production it does not panic.
func (l slogLogger) DPanic(msg string, tags ...tag.Tag) { l.emit(slog.LevelError, msg, tags) }

// Panic logs at error level and panics, as the server expects.
func (l slogLogger) Panic(msg string, tags ...tag.Tag) {
	l.emit(slog.LevelError, msg, tags)
	panic(fatalError{msg: msg, attrs: tagsToAttrs(tags)})
}

// Fatal logs at error level. The server's own logger would exit the process,
// which must never happen to the hub. While the server is being constructed
// (fatalPanics set) a Fatal is almost always a port that could not be bound;
// we panic so that Start can recover and return it as an error. After that it
// is only logged, as the Temporal CLI does, because killing the whole hub over
// one failed internal invariant is worse than carrying on.
func (l slogLogger) Fatal(msg string, tags ...tag.Tag) {
	l.emit(slog.LevelError, msg, tags)
	if l.fatalPanics.Load() {
		panic(fatalError{msg: msg, attrs: tagsToAttrs(tags)})
	}
}

// With returns a logger that adds tags to every record. Implementing it saves
// the server from wrapping our logger in its slower generic prepender.
func (l slogLogger) With(tags ...tag.Tag) log.Logger {
	args := make([]any, 0, len(tags))
	for _, a := range tagsToAttrs(tags) {
		args = append(args, a)
	}
	l.log = l.log.With(args...)
	return l
}

func (l slogLogger) emit(level slog.Level, msg string, tags []tag.Tag) {
	ctx := context.Background()
	if level < l.level.Level() || !l.log.Enabled(ctx, level) {
		return
	}
	if l.stopping.Load() && level < slog.LevelError {
		return
	}
	attrs := tagsToAttrs(tags)
	if l.stopping.Load() && isCanceled(attrs) {
		return
	}
	l.log.LogAttrs(ctx, level, msg, attrs...)
}

// isCanceled reports whether a record is about a canceled context, which is
// how every in-flight request ends when the server stops.
func isCanceled(attrs []slog.Attr) bool {
	for _, a := range attrs {
		if err, ok := a.Value.Any().(error); ok && errors.Is(err, context.Canceled) {
			return true
		}
		// Errors that crossed gRPC arrive as text only.
		if strings.Contains(a.Value.String(), context.Canceled.Error()) {
			return true
		}
	}
	return false
}

func tagsToAttrs(tags []tag.Tag) []slog.Attr {
	attrs := make([]slog.Attr, 0, len(tags))
	for _, t := range tags {
		// Tag.Value renders error fields through a map encoder that may pick
		// "errorVerbose" at random; keep the error itself instead.
		if zt, ok := t.(tag.ZapTag); ok && zt.Field().Type == zapcore.ErrorType {
			if err, ok := zt.Field().Interface.(error); ok {
				attrs = append(attrs, slog.Any(t.Key(), err))
				continue
			}
		}
		attrs = append(attrs, slog.Any(t.Key(), t.Value()))
	}
	return attrs
}

// fatalError carries a server Fatal/Panic message out of a recovered panic.
type fatalError struct {
	msg   string
	attrs []slog.Attr
}

func (e fatalError) Error() string {
	var b strings.Builder
	b.WriteString(e.msg)
	for _, a := range e.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	return b.String()
}
