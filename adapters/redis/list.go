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

// ListSessionsPage lists at most limit of the sessions holding items or a
// checkpoint (adapters.PageLister), with SCAN MATCH over the layout's item
// lists and checkpoint hashes on each primary in turn (in the order of
// their addresses). A session is listed from its item list; one without
// an item list is listed from its checkpoint hash when that holds a
// checkpoint (one pipeline per SCAN batch that met such hashes: EXISTS on
// the item list, HSCAN MATCH v:* on the hash; a hash holding only
// AddItemsOnce's operation ids, what Clear leaves of a session that never
// saved a checkpoint, is not a session). SCAN's guarantees are the
// listing's: a session whose item list exists for the whole pass, or whose
// checkpoint exists for the whole pass while it has no item list, is
// listed at least once; one may be listed twice (the keyspace was rehashed
// between pages, or its item list went between the visits of its two
// keys); ids come in no particular order. A page makes at most 64 SCAN
// calls, so that a keyspace of mostly other keys returns short pages
// (even empty ones) rather than one long wait.
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
	match := st.listMatch()
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
		batch, err := st.batchIDs(ctx, keys, func(id string) bool { return !skip || id > pos.after })
		if err != nil {
			return nil, "", fmt.Errorf("redis: list sessions: %w", err)
		}
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

// listMatch is the SCAN MATCH pattern of the layout's item lists and
// checkpoint hashes (and of a few other keys, which batchIDs leaves out):
// <prefix>:{*}:[ic]* in the native layout (":items", ":checkpoints"; not
// ":meta"), <prefix>:*:messages* in the Python layout (":messages" and
// ":checkpoints:messages:counter").
func (st *Store) listMatch() string {
	if st.opts.Layout == LayoutPython {
		return globEscape(st.opts.KeyPrefix) + ":*" + pythonMessagesSuffix + "*"
	}
	return globEscape(st.opts.KeyPrefix) + ":{*}:[ic]*"
}

// checkpointKeyID returns the session whose checkpoint hash key is, in
// the Store's layout.
func (st *Store) checkpointKeyID(key string) (string, bool) {
	var id string
	if st.opts.Layout == LayoutPython {
		rest, ok := strings.CutPrefix(key, st.opts.KeyPrefix+":")
		if !ok {
			return "", false
		}
		if id, ok = strings.CutSuffix(rest, pythonCheckpointsSuffix); !ok {
			return "", false
		}
	} else {
		var kind KeyKind
		var ok bool
		if id, kind, ok = ParseKey(st.opts.KeyPrefix, key); !ok || kind != KeyCheckpoints {
			return "", false
		}
	}
	h, err := st.Session(id)
	if err != nil || h.all[len(h.all)-1] != key {
		return "", false
	}
	return id, true
}

// batchIDs returns the sessions one SCAN batch lists, sorted, each once:
// the ids of its item lists, and those of its checkpoint hashes whose
// session has no item list and whose hash holds a checkpoint (a v: field;
// an HSCAN that does not finish in one call is taken as holding one, so
// that a session is never lost to a large hash of operation ids). Only the
// ids keep accepts are taken. The checkpoint hashes cost one pipeline,
// through the Store's client (which sends each command to its key's
// primary in a cluster).
func (st *Store) batchIDs(ctx context.Context, keys []string, keep func(string) bool) ([]string, error) {
	batch := make([]string, 0, len(keys))
	type candidate struct {
		id     string
		items  *goredis.IntCmd
		fields *goredis.ScanCmd
	}
	var cands []candidate
	for _, k := range keys {
		if id, ok := st.itemsKeyID(k); ok {
			if keep(id) {
				batch = append(batch, id)
			}
			continue
		}
		if id, ok := st.checkpointKeyID(k); ok && keep(id) {
			cands = append(cands, candidate{id: id})
		}
	}
	if len(cands) > 0 {
		_, err := st.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i := range cands {
				h, err := st.Session(cands[i].id)
				if err != nil {
					return err
				}
				cands[i].items = p.Exists(ctx, h.keys[0])
				cands[i].fields = p.HScan(ctx, h.all[len(h.all)-1], 0, versionField+"*", scanCount)
			}
			return nil
		})
		if err != nil && !isServerError(err) {
			return nil, err
		}
		for _, c := range cands {
			if err := errors.Join(c.items.Err(), c.fields.Err()); err != nil {
				if isServerError(err) {
					continue // a key of another type at the hash's name: not a checkpoint hash
				}
				return nil, err
			}
			fields, cursor := c.fields.Val()
			if c.items.Val() == 0 && (len(fields) > 0 || cursor != 0) {
				batch = append(batch, c.id)
			}
		}
	}
	sort.Strings(batch)
	return slices.Compact(batch), nil
}

// listAllSessions reads the whole paged listing and returns its ids,
// sorted, each once: ListSessions.
func (st *Store) listAllSessions(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	cursor := ""
	for {
		ids, next, err := st.listSessionsPage(ctx, cursor, scanCount)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			seen[id] = true
		}
		if next == "" {
			break
		}
		cursor = next
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out, nil
}

// isServerError reports whether err is an error reply of the server (such
// as WRONGTYPE), not a failure to reach it.
func isServerError(err error) bool {
	var re goredis.Error
	return errors.As(err, &re) && !errors.Is(err, goredis.ErrClosed)
}
