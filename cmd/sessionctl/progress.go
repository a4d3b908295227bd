package main

import (
	"fmt"
	"io"
	"time"
)

// Progress pacing: on a terminal one line redrawn at most every
// progressRedraw; elsewhere (a log file, a pipe) a line every
// progressEvery, and none for a command that finishes sooner.
var (
	progressRedraw = 100 * time.Millisecond
	progressEvery  = 10 * time.Second
)

// progress reports how far a long command got, on standard error.
type progress struct {
	e     *env
	verb  string // "diagnosed", "copied", …
	total int
	start time.Time
	last  time.Time
	drawn bool
}

func newProgress(e *env, verb string, total int) *progress {
	now := time.Now()
	return &progress{e: e, verb: verb, total: total, start: now, last: now}
}

// step records that n of the total sessions are done.
func (p *progress) step(n int) {
	now := time.Now()
	if p.e.isTerminal {
		if now.Sub(p.last) < progressRedraw && n != p.total {
			return
		}
		p.last, p.drawn = now, true
		fmt.Fprintf(p.e.stderr, "\r%d/%d sessions %s (%s)\x1b[K", n, p.total, p.verb, now.Sub(p.start).Round(time.Second))
		return
	}
	if now.Sub(p.last) >= progressEvery {
		p.last = now
		fmt.Fprintf(p.e.stderr, "%d/%d sessions %s (%s)\n", n, p.total, p.verb, now.Sub(p.start).Round(time.Second))
	}
}

// printf prints a line of its own on standard output, clearing the
// progress line first on a terminal.
func (p *progress) printf(format string, args ...any) { p.fprintf(p.e.stdout, format, args...) }

// logf is printf on standard error.
func (p *progress) logf(format string, args ...any) { p.fprintf(p.e.stderr, format, args...) }

func (p *progress) fprintf(w io.Writer, format string, args ...any) {
	if p.drawn {
		fmt.Fprint(p.e.stderr, "\r\x1b[K")
		p.drawn = false
	}
	fmt.Fprintf(w, format+"\n", args...)
}

// done ends the progress line on a terminal.
func (p *progress) done() {
	if p.drawn {
		fmt.Fprint(p.e.stderr, "\r\x1b[K")
		p.drawn = false
	}
}
