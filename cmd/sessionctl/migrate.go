package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/session"
)

func init() {
	commands["migrate"] = command{"copy sessions between stores or layouts, atomically per session, resumable", runMigrate}
}

// runMigrate copies sessions from one store to another. Each session lands
// with one atomic replace (every adapter has the replace capability), so it
// is either fully present at the destination or not at all; a session whose
// destination already holds exactly the source's items is skipped, which
// makes an interrupted migration resumable by running it again. A
// destination session holding other items is refused unless --overwrite.
func runMigrate(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "migrate", "--from URL --to URL [--session ID…]")
	from := fs.String("from", "", "source store URL")
	to := fs.String("to", "", "destination store URL")
	overwrite := fs.Bool("overwrite", false, "replace destination sessions that hold different items")
	var ids multiFlag
	fs.Var(&ids, "session", "migrate this session (repeatable; default: every session the source lists)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("unexpected arguments %q (use --from, --to and --session)", pos)
	}
	if *from == "" || *to == "" {
		return usagef("both --from and --to are required")
	}
	src, corrupt, err := openStore(ctx, *from)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	defer src.Close()
	dst, err := adapters.Open(ctx, *to)
	if err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	defer dst.Close()
	list, err := sessionIDs(ctx, src, ids, *from)
	if err != nil {
		return err
	}
	if !dst.Declared().Has(session.CapReplace) {
		fmt.Fprintf(e.stderr, "warning: %s has no atomic replace; a session interrupted mid-copy may be partial until migrate runs again\n", redactDSN(*to))
	}
	p := newProgress(e, len(list))
	var copied, skipped, failed int
	for i, id := range list {
		if err := ctx.Err(); err != nil {
			p.done()
			return err
		}
		res, err := migrateOne(ctx, src, dst, id, *overwrite)
		switch {
		case err != nil:
			failed++
			p.logf("session %q: %v", id, err)
		case res == "skipped":
			skipped++
		default:
			copied++
		}
		if n := len(corrupt.Reports(id)); n > 0 {
			p.logf("session %q: %s skipped (not copied)", id, plural(n, "corrupt record", "corrupt records"))
		}
		p.step(i+1, id)
	}
	p.done()
	fmt.Fprintf(e.stdout, "%s: %d copied, %d already present, %d failed\n",
		plural(len(list), "session", "sessions"), copied, skipped, failed)
	if failed > 0 {
		return errFailed
	}
	return nil
}

func migrateOne(ctx context.Context, src, dst adapters.Store, id string, overwrite bool) (string, error) {
	s, err := src.Session(id)
	if err != nil {
		return "", err
	}
	d, err := dst.Session(id)
	if err != nil {
		return "", err
	}
	items, err := session.All(ctx, s)
	if err != nil {
		return "", fmt.Errorf("read: %w", err)
	}
	have, err := session.All(ctx, d)
	if err != nil {
		return "", fmt.Errorf("read destination: %w", err)
	}
	if sameItems(items, have) {
		return "skipped", nil
	}
	if len(have) > 0 && !overwrite {
		return "", fmt.Errorf("the destination holds %s that differ from the source; use --overwrite to replace them", plural(len(have), "item", "items"))
	}
	if err := session.Replace(ctx, d, items); err != nil {
		return "", fmt.Errorf("write: %w", err)
	}
	return "copied", nil
}

// progress shows a bar on a terminal and plain lines otherwise.
type progress struct {
	e     *env
	total int
	start time.Time
	last  time.Time
}

func newProgress(e *env, total int) *progress {
	return &progress{e: e, total: total, start: time.Now()}
}

func (p *progress) step(n int, id string) {
	if p.e.isTerminal {
		width := 30
		fill := width * n / max(p.total, 1)
		fmt.Fprintf(p.e.stderr, "\r[%s%s] %d/%d %s\x1b[K", strings.Repeat("#", fill), strings.Repeat(".", width-fill), n, p.total, truncate(id, 30))
		return
	}
	if n == p.total || time.Since(p.last) >= time.Second || n%100 == 0 {
		p.last = time.Now()
		fmt.Fprintf(p.e.stderr, "migrate: %d/%d sessions (%s)\n", n, p.total, time.Since(p.start).Round(time.Millisecond))
	}
}

func (p *progress) logf(format string, args ...any) {
	if p.e.isTerminal {
		fmt.Fprint(p.e.stderr, "\r\x1b[K")
	}
	fmt.Fprintf(p.e.stderr, format+"\n", args...)
}

func (p *progress) done() {
	if p.e.isTerminal {
		fmt.Fprintln(p.e.stderr)
	}
}
