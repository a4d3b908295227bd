package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentsessions/sessions/adapters"
)

var _ adapters.PageLister = (*urlStore)(nil)

// ErrStaleCursor reports a listing cursor naming a cluster primary the
// cluster no longer has: the listing cannot resume, and starts again
// from "".
var ErrStaleCursor = errors.New("redis: the listing cursor names a primary the cluster no longer has")

const (
	scanCount     = 1000 // SCAN's COUNT hint
	scansPerPage  = 64   // SCAN calls one page makes at most
	cursorVersion = "r1"
)

// ListSessionsPage lists at most limit of the sessions holding items
// (adapters.PageLister), with SCAN MATCH over the layout's item lists on
// each primary in turn (in the order of their addresses). SCAN's
// guarantees are the listing's: a session whose items exist for the whole
// pass is listed at least once; one may be listed twice (the keyspace was
// rehashed between pages); ids come in no particular order. A page makes
// at most 64 SCAN calls, so that a keyspace of mostly other keys returns
// short pages (even empty ones) rather than one long wait.
//
// The cursor names the primary and its SCAN cursor. A page that ends
// inside a SCAN batch (whose ids it takes in sorted order) names that
// batch instead: its start, COUNT and end, and the last id taken. The
// next page scans the batch again and, when it ends where it ended
// before (it covered the same part of the keyspace), skips the ids up to
// the last one taken; otherwise (the keyspace was rehashed) it takes the
// whole batch again, repeating ids rather than losing any.
func (s *urlStore) ListSessionsPage(ctx context.Context, cursor string, limit int) ([]string, string, error) {
	return s.st.listSessionsPage(ctx, cursor, limit)
}

// primary is one primary the listing scans.
type primary struct {
	addr   string
	client goredis.UniversalClient
}

// primaries returns the primaries to scan, sorted by address: the client
// itself unless it is a cluster client.
func (st *Store) primaries(ctx context.Context) ([]primary, error) {
	cc, ok := st.client.(*goredis.ClusterClient)
	if !ok {
		return []primary{{client: st.client}}, nil
	}
	var mu sync.Mutex
	var out []primary
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
		mu.Lock()
		out = append(out, primary{addr: c.Options().Addr, client: c})
		mu.Unlock()
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].addr < out[j].addr })
	return out, err
}

// listCursor is a position of the listing: the primary at addr and its
// SCAN cursor scan; or, when after is not "", the batch SCAN returned
// from scan with COUNT count, ending at next, of which the ids up to
// after were taken.
type listCursor struct {
	addr       string
	scan, next uint64
	count      int64
	after      string
}

func (c listCursor) String() string {
	return fmt.Sprintf("%s %s %d %d %d %s", cursorVersion, c.addr, c.scan, c.count, c.next, c.after)
}

func parseListCursor(s string) (listCursor, error) {
	bad := fmt.Errorf("redis: list sessions: %q is not a cursor of this store", s)
	parts := strings.SplitN(s, " ", 6)
	if len(parts) != 6 || parts[0] != cursorVersion {
		return listCursor{}, bad
	}
	c := listCursor{addr: parts[1], after: parts[5]}
	var err [3]error
	c.scan, err[0] = strconv.ParseUint(parts[2], 10, 64)
	c.count, err[1] = strconv.ParseInt(parts[3], 10, 64)
	c.next, err[2] = strconv.ParseUint(parts[4], 10, 64)
	// Only what a page writes is a cursor: a COUNT between 1 and scanCount
	// inside a batch (the hint SCAN gave that batch; a larger one would make
	// one SCAN walk the whole keyspace), none between batches.
	if errors.Join(err[:]...) != nil || c.String() != s || c.count < 0 || c.count > scanCount ||
		(c.after == "") != (c.count == 0) || c.after == "" && c.next != 0 {
		return listCursor{}, bad
	}
	return c, nil
}

func (st *Store) listSessionsPage(ctx context.Context, cursor string, limit int) ([]string, string, error) {
	if limit <= 0 {
		return nil, "", fmt.Errorf("redis: list sessions: limit %d is not positive", limit)
	}
	nodes, err := st.primaries(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("redis: list sessions: %w", err)
	}
	pos := listCursor{}
	node := 0
	if cursor != "" {
		if pos, err = parseListCursor(cursor); err != nil {
			return nil, "", err
		}
		node = sort.Search(len(nodes), func(i int) bool { return nodes[i].addr >= pos.addr })
		if node == len(nodes) || nodes[node].addr != pos.addr {
			return nil, "", fmt.Errorf("%w (%s)", ErrStaleCursor, pos.addr)
		}
	} else if len(nodes) > 0 {
		pos.addr = nodes[0].addr
	}
	match := globEscape(st.opts.KeyPrefix) + ":{*}" + itemsSuffix
	if st.opts.Layout == LayoutPython {
		match = globEscape(st.opts.KeyPrefix) + ":*" + pythonMessagesSuffix
	}
	ids := make([]string, 0, min(limit, 1024))
	for calls := 0; node < len(nodes); calls++ {
		if calls == scansPerPage {
			return ids, pos.String(), nil
		}
		count := int64(min(limit, scanCount))
		if pos.after != "" {
			count = pos.count
		}
		keys, next, err := nodes[node].client.Scan(ctx, pos.scan, match, count).Result()
		if err != nil {
			return nil, "", fmt.Errorf("redis: list sessions: %w", err)
		}
		skip := pos.after != "" && next == pos.next
		batch := make([]string, 0, len(keys))
		for _, k := range keys {
			if id, ok := st.itemsKeyID(k); ok && (!skip || id > pos.after) {
				batch = append(batch, id)
			}
		}
		sort.Strings(batch)
		batch = slices.Compact(batch)
		if room := limit - len(ids); len(batch) > room {
			ids = append(ids, batch[:room]...)
			pos.count, pos.next, pos.after = count, next, ids[len(ids)-1]
			return ids, pos.String(), nil
		}
		ids = append(ids, batch...)
		pos.scan, pos.count, pos.next, pos.after = next, 0, 0, ""
		if next == 0 {
			node++
			if node < len(nodes) {
				pos.addr = nodes[node].addr
			}
		}
		if len(ids) == limit {
			break
		}
	}
	if node == len(nodes) {
		return ids, "", nil
	}
	return ids, pos.String(), nil
}
