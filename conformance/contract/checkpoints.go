package contract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/session"
)

// The checkpoint clauses (session.CheckpointStore and
// session.CheckpointCommitter): versioned saves and deletes, conflicts of
// stale copies on one handle and across two, a linearizable compare and
// swap under concurrent saves, checkpoints confined to their session and
// kept by Clear, expiry with the session's data, and appends committed
// atomically with their checkpoint.
//
// Every checkpoint a clause saves is deleted when it ends (the suite's
// cleanup deletes the checkpoints of every session it clears, whatever
// their version).

// ckptName is the checkpoint name the clauses use unless they test names.
const ckptName = "run"

// checkpointStore returns s as a session.CheckpointStore or fails.
func checkpointStore(c *suite.C, s session.Session) session.CheckpointStore {
	c.Helper()
	cs, ok := s.(session.CheckpointStore)
	if !ok {
		c.Fatalf("checkpoints are declared but session %q (%T) is not a session.CheckpointStore", s.SessionID(), s)
	}
	return cs
}

// checkpointCommitter returns s as a session.CheckpointCommitter or fails.
func checkpointCommitter(c *suite.C, s session.Session) session.CheckpointCommitter {
	c.Helper()
	cc, ok := s.(session.CheckpointCommitter)
	if !ok {
		c.Fatalf("checkpoint-commit is declared but session %q (%T) is not a session.CheckpointCommitter", s.SessionID(), s)
	}
	return cc
}

// saveCkpt saves doc under name at version and returns the new version,
// which must be at least 1 (and above version, for a versioned save).
func saveCkpt(c *suite.C, cs session.CheckpointStore, name string, doc []byte, version int64, what string) int64 {
	c.Helper()
	v, err := cs.SaveCheckpoint(c.Context(), name, doc, version)
	require.NoError(c, err, "%s: save %q at version %d", what, name, version)
	require.Greater(c, v, int64(0), "%s: a save returns a version of at least 1", what)
	if version > 0 {
		require.Greater(c, v, version, "%s: a save advances the version", what)
	}
	return v
}

// requireCkpt fails unless name holds exactly doc at version.
func requireCkpt(c *suite.C, cs session.CheckpointStore, name string, doc []byte, version int64, what string) {
	c.Helper()
	got, v, err := cs.LoadCheckpoint(c.Context(), name)
	require.NoError(c, err, "%s: load %q", what, name)
	requireSameBytes(c, doc, got, "%s: checkpoint %q", what, name)
	require.Equal(c, version, v, "%s: version of checkpoint %q", what, name)
}

// requireNoCkpt fails unless loading name is ErrNoCheckpoint.
func requireNoCkpt(c *suite.C, cs session.CheckpointStore, name string, what string) {
	c.Helper()
	doc, v, err := cs.LoadCheckpoint(c.Context(), name)
	require.Truef(c, errors.Is(err, session.ErrNoCheckpoint),
		"%s: load %q: want ErrNoCheckpoint, got err %v (version %d, %d bytes)", what, name, err, v, len(doc))
}

// requireConflict fails unless err wraps ErrCheckpointConflict.
func requireConflict(c *suite.C, err error, format string, args ...any) {
	c.Helper()
	require.Truef(c, errors.Is(err, session.ErrCheckpointConflict), "%s: want ErrCheckpointConflict, got %v", fmt.Sprintf(format, args...), err)
}

// requireNames fails unless the session lists exactly names, sorted.
func requireNames(c *suite.C, cs session.CheckpointStore, names []string, what string) {
	c.Helper()
	got, err := cs.ListCheckpoints(c.Context())
	require.NoError(c, err, "%s: list", what)
	want := slices.Clone(names)
	sort.Strings(want)
	if len(want) == 0 {
		require.Empty(c, got, "%s: list", what)
		return
	}
	require.Equal(c, want, got, "%s: list returns every name, sorted (as sort.Strings)", what)
}

// requireSameBytes fails unless got is want byte for byte, saying where
// they first differ rather than printing both (they can be large).
func requireSameBytes(c *suite.C, want, got []byte, format string, args ...any) {
	c.Helper()
	if bytes.Equal(want, got) {
		return
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	snip := func(b []byte) string {
		lo, hi := max(i-16, 0), min(i+48, len(b))
		if lo >= hi {
			return `""`
		}
		return fmt.Sprintf("%q", b[lo:hi])
	}
	c.Fatalf("%s: not stored byte for byte: want %d bytes, got %d; first difference at byte %d: want …%s…, got …%s…",
		fmt.Sprintf(format, args...), len(want), len(got), i, snip(want), snip(got))
}

// ckptDocs are documents that must come back byte for byte: non-ASCII
// text raw and escaped, every kind of escape, odd spacing and key order
// (a store that parses and re-encodes JSON changes them), and a large one.
func ckptDocs() map[string][]byte {
	var big strings.Builder
	big.WriteString(`{"kind":"large","blob":"`)
	for i := 0; big.Len() < 256<<10; i++ {
		fmt.Fprintf(&big, "%06d-0123456789abcdef-é☃😀-\\n\\\"-", i)
	}
	big.WriteString(`"}`)
	return map[string][]byte{
		"unicode": []byte(`{"text":"caf\u00e9 \u2603 \ud83d\ude00 and raw é ☃ 😀 ∑ 中文 עברית","k":"ключ"}`),
		"escapes": []byte(`{"s":"line\nbreak\ttab \"quote\" back\\slash \u0001 \u007f \/slash \u0000 nul \r\b\f"}`),
		"spacing": []byte("{ \"z\" : 1 ,\n\t\"a\" : [ 1.0 , 2e0 , -0.0 ] , \"m\" : { } ,\"dup\":1,\"dup\":2 }"),
		"large":   []byte(big.String()),
	}
}

// clauseCheckpointCRUD: load, save, advance, list, delete, with versions;
// documents byte for byte; seen through both handles.
func clauseCheckpointCRUD(c *suite.C) {
	ctx := c.Context()
	s := c.Fresh("ckpt-crud")
	cs := checkpointStore(c, s)
	ps := checkpointStore(c, c.OpenPeer(s.SessionID()))

	requireNoCkpt(c, cs, ckptName, "a session never written")
	requireNames(c, cs, nil, "a session never written")

	doc1 := []byte(`{"step":1,"state":"first"}`)
	v1 := saveCkpt(c, cs, ckptName, doc1, 0, "create (version 0)")
	requireCkpt(c, cs, ckptName, doc1, v1, "after create")
	requireCkpt(c, ps, ckptName, doc1, v1, "after create, from the peer")

	doc2 := []byte(`{"step":2,"state":"second"}`)
	v2 := saveCkpt(c, cs, ckptName, doc2, v1, "save at the loaded version")
	requireCkpt(c, ps, ckptName, doc2, v2, "after a save, from the peer")
	doc3 := []byte(`{"step":3}`)
	v3 := saveCkpt(c, ps, ckptName, doc3, v2, "save from the peer")
	requireCkpt(c, cs, ckptName, doc3, v3, "after the peer's save")

	// Documents byte for byte, each under its own name; the names are
	// listed sorted whatever the order they were saved in.
	docs := ckptDocs()
	versions := map[string]int64{ckptName: v3}
	names := []string{ckptName}
	for _, n := range []string{"unicode", "escapes", "spacing", "large"} {
		name := "doc-" + n
		buf := slices.Clone(docs[n])
		versions[name] = saveCkpt(c, cs, name, buf, 0, "create "+name)
		for i := range buf {
			buf[i] = 'X' // the store must have copied the caller's bytes
		}
		names = append(names, name)
	}
	for _, name := range []string{"Z-upper", "a", "0"} {
		versions[name] = saveCkpt(c, ps, name, []byte(fmt.Sprintf(`{"name":%q}`, name)), 0, "create "+name)
		names = append(names, name)
	}
	for _, n := range []string{"unicode", "escapes", "spacing", "large"} {
		requireCkpt(c, cs, "doc-"+n, docs[n], versions["doc-"+n], "document "+n)
		got, _, err := ps.LoadCheckpoint(ctx, "doc-"+n)
		require.NoError(c, err)
		requireSameBytes(c, docs[n], got, "document %s, from the peer", n)
		for i := range got {
			got[i] = 'Y' // nor may it hand out its own
		}
		requireCkpt(c, cs, "doc-"+n, docs[n], versions["doc-"+n], "document "+n+" after the caller changed a loaded copy")
	}
	requireNames(c, cs, names, "every checkpoint")
	requireNames(c, ps, names, "every checkpoint, from the peer")
	require.Empty(c, all(c, s), "checkpoints are not items: the history stays empty")

	// A save that fails writes nothing: a cancelled one, and one whose
	// document is replaced at the wrong version.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err := cs.SaveCheckpoint(cctx, ckptName, []byte(`{"lost":true}`), v3)
	require.Truef(c, errors.Is(err, context.Canceled), "save with a cancelled context: want context.Canceled, got %v", err)
	err = cs.DeleteCheckpoint(cctx, ckptName, v3)
	require.Truef(c, errors.Is(err, context.Canceled), "delete with a cancelled context: want context.Canceled, got %v", err)
	requireCkpt(c, cs, ckptName, doc3, v3, "after cancelled calls")

	// Delete at the stored version removes the checkpoint, and only it.
	require.NoError(c, cs.DeleteCheckpoint(ctx, ckptName, v3), "delete at the stored version")
	requireNoCkpt(c, cs, ckptName, "after delete")
	requireNoCkpt(c, ps, ckptName, "after delete, from the peer")
	names = slices.DeleteFunc(names, func(n string) bool { return n == ckptName })
	requireNames(c, ps, names, "after delete")
	requireCkpt(c, ps, "doc-large", docs["large"], versions["doc-large"], "a neighbour of the deleted checkpoint")

	// Deleting what is not there succeeds at version 0 and AnyVersion,
	// and conflicts at any other version.
	require.NoError(c, cs.DeleteCheckpoint(ctx, ckptName, 0), "delete a missing checkpoint at version 0")
	require.NoError(c, cs.DeleteCheckpoint(ctx, ckptName, session.AnyVersion), "delete a missing checkpoint at AnyVersion")
	requireConflict(c, cs.DeleteCheckpoint(ctx, ckptName, v3), "delete a missing checkpoint at version %d", v3)
	// And saving over nothing at a version other than 0 conflicts and
	// creates nothing.
	_, err = cs.SaveCheckpoint(ctx, ckptName, []byte(`{"ghost":true}`), v3)
	requireConflict(c, err, "save a missing checkpoint at version %d", v3)
	requireNoCkpt(c, ps, ckptName, "after a conflicting save of a missing checkpoint")

	// A deleted checkpoint is created again from version 0.
	doc4 := []byte(`{"step":4,"state":"again"}`)
	v4 := saveCkpt(c, cs, ckptName, doc4, 0, "create again after delete")
	requireCkpt(c, ps, ckptName, doc4, v4, "created again")

	// Delete everything at its version: nothing is left.
	versions[ckptName] = v4
	names = append(names, ckptName)
	for _, name := range names {
		require.NoError(c, ps.DeleteCheckpoint(ctx, name, versions[name]), "delete %q at version %d", name, versions[name])
	}
	requireNames(c, cs, nil, "after deleting every checkpoint")
	require.Empty(c, all(c, s))
}

// clauseCheckpointStale: of two copies loaded at one version, only the
// first to save succeeds; creates over an existing checkpoint and stale
// deletes conflict and write nothing; AnyVersion skips the check. It runs
// with both copies on one handle and with the second on the peer, so the
// interlock is the store's, not a handle's cache.
func clauseCheckpointStale(c *suite.C) {
	one := c.Fresh("ckpt-stale-one")
	checkpointStale(c, checkpointStore(c, one), checkpointStore(c, one), "one handle")
	first := c.Fresh("ckpt-stale-peer")
	second := c.OpenPeer(first.SessionID())
	checkpointStale(c, checkpointStore(c, first), checkpointStore(c, second), "two handles")
}

func checkpointStale(c *suite.C, a, b session.CheckpointStore, where string) {
	c.Helper()
	ctx := c.Context()
	at := func(what string) string { return what + " (" + where + ")" }

	// A conflicting save of a checkpoint that is not there creates nothing.
	_, err := b.SaveCheckpoint(ctx, ckptName, []byte(`{"ghost":1}`), 3)
	requireConflict(c, err, "%s", at("save a missing checkpoint at version 3"))
	requireNoCkpt(c, a, ckptName, at("after a conflicting save of a missing checkpoint"))

	seed := []byte(`{"copy":"seed"}`)
	v0 := saveCkpt(c, a, ckptName, seed, 0, at("create"))
	_, va, err := a.LoadCheckpoint(ctx, ckptName)
	require.NoError(c, err)
	_, vb, err := b.LoadCheckpoint(ctx, ckptName)
	require.NoError(c, err)
	require.Equal(c, v0, va, at("the first copy loads the created version"))
	require.Equal(c, v0, vb, at("the second copy loads the created version"))

	docA := []byte(`{"copy":"first"}`)
	v1 := saveCkpt(c, a, ckptName, docA, va, at("the first copy's save"))
	_, err = b.SaveCheckpoint(ctx, ckptName, []byte(`{"copy":"second"}`), vb)
	requireConflict(c, err, "%s", at("the second copy saves at the version both loaded"))
	requireCkpt(c, b, ckptName, docA, v1, at("after the stale save"))
	requireCkpt(c, a, ckptName, docA, v1, at("after the stale save"))

	_, err = b.SaveCheckpoint(ctx, ckptName, []byte(`{"copy":"create"}`), 0)
	requireConflict(c, err, "%s", at("create (version 0) over an existing checkpoint"))
	_, err = b.SaveCheckpoint(ctx, ckptName, []byte(`{"copy":"future"}`), v1+7)
	requireConflict(c, err, "%s", at("save at a version never stored"))
	requireConflict(c, b.DeleteCheckpoint(ctx, ckptName, vb), "%s", at("delete at a stale version"))
	requireConflict(c, b.DeleteCheckpoint(ctx, ckptName, 0), "%s", at("delete at version 0 of an existing checkpoint"))
	requireCkpt(c, a, ckptName, docA, v1, at("after conflicting creates and deletes"))
	requireNames(c, b, []string{ckptName}, at("after conflicting creates and deletes"))

	// AnyVersion overwrites whatever is stored, and advances the version:
	// the holder of v1 is stale now.
	docAny := []byte(`{"copy":"any"}`)
	v2, err := b.SaveCheckpoint(ctx, ckptName, docAny, session.AnyVersion)
	require.NoError(c, err, at("save at AnyVersion"))
	require.Greater(c, v2, v1, at("a save at AnyVersion advances the version"))
	requireCkpt(c, a, ckptName, docAny, v2, at("after the save at AnyVersion"))
	_, err = a.SaveCheckpoint(ctx, ckptName, []byte(`{"copy":"late"}`), v1)
	requireConflict(c, err, "%s", at("save at the version AnyVersion overwrote"))
	requireCkpt(c, b, ckptName, docAny, v2, at("after the late save"))

	// AnyVersion deletes whatever is stored, and creates over nothing.
	require.NoError(c, a.DeleteCheckpoint(ctx, ckptName, session.AnyVersion), at("delete at AnyVersion"))
	requireNoCkpt(c, b, ckptName, at("after the delete at AnyVersion"))
	requireNoCkpt(c, a, ckptName, at("after the delete at AnyVersion"))
	docNew := []byte(`{"copy":"new"}`)
	v3, err := b.SaveCheckpoint(ctx, ckptName, docNew, session.AnyVersion)
	require.NoError(c, err, at("create at AnyVersion"))
	require.Greater(c, v3, int64(0))
	requireCkpt(c, a, ckptName, docNew, v3, at("created at AnyVersion"))
	require.NoError(c, b.DeleteCheckpoint(ctx, ckptName, v3))
	requireNames(c, a, nil, at("at the end"))
}

// Concurrent-save shape: two handles × 8 goroutines × 30 load-then-save
// attempts on one checkpoint.
const (
	ckptConcGoroutines = 8
	ckptConcAttempts   = 30
)

// clauseCheckpointConcurrent: goroutines on two handles load and save one
// checkpoint at the loaded version. The successful saves must form one
// chain (each from the version the previous one returned, no two from one
// version: no lost update), the final checkpoint is the last success's,
// and every load returned a document together with the version that saved
// it.
func clauseCheckpointConcurrent(c *suite.C) {
	ctx := c.Context()
	id := c.ID("ckpt-conc")
	handles := []session.CheckpointStore{checkpointStore(c, c.Open(id)), checkpointStore(c, c.OpenPeer(id))}
	seedDoc := `{"w":"seed"}`
	seed := saveCkpt(c, handles[0], ckptName, []byte(seedDoc), 0, "create")

	type save struct {
		from, to int64
		doc      string
	}
	type load struct {
		version int64
		doc     string
	}
	var (
		mu        sync.Mutex
		saves     []save
		loads     []load
		conflicts int
		failures  []string
		wg        sync.WaitGroup
	)
	for h := range handles {
		for g := 0; g < ckptConcGoroutines; g++ {
			wg.Add(1)
			go func(cs session.CheckpointStore, writer string) {
				defer wg.Done()
				for a := 0; a < ckptConcAttempts; a++ {
					doc, v, err := cs.LoadCheckpoint(ctx, ckptName)
					if err != nil {
						mu.Lock()
						failures = append(failures, fmt.Sprintf("writer %s attempt %d: load: %v", writer, a, err))
						mu.Unlock()
						return
					}
					runtime.Gosched()
					mine := fmt.Sprintf(`{"w":%q,"a":%d}`, writer, a)
					nv, err := cs.SaveCheckpoint(ctx, ckptName, []byte(mine), v)
					mu.Lock()
					loads = append(loads, load{v, string(doc)})
					switch {
					case err == nil:
						saves = append(saves, save{v, nv, mine})
					case errors.Is(err, session.ErrCheckpointConflict):
						conflicts++
					default:
						failures = append(failures, fmt.Sprintf("writer %s attempt %d: save at version %d: %v", writer, a, v, err))
					}
					mu.Unlock()
					if err != nil && !errors.Is(err, session.ErrCheckpointConflict) {
						return
					}
				}
			}(handles[h], fmt.Sprintf("%d.%d", h, g))
		}
	}
	wg.Wait()
	require.Empty(c, failures, "concurrent loads and saves fail only with ErrCheckpointConflict")
	total := len(handles) * ckptConcGoroutines * ckptConcAttempts
	require.Equal(c, total, len(saves)+conflicts, "every attempt either saved or conflicted")
	require.NotEmpty(c, saves, "of %d attempts none saved: a save at the version just loaded must succeed when nobody else saved", total)

	// One chain from the seed: each success from the version the previous
	// one returned.
	byFrom := map[int64]save{}
	seenTo := map[int64]bool{}
	for _, s := range saves {
		if other, dup := byFrom[s.from]; dup {
			c.Fatalf("two saves at version %d both succeeded (%s and %s): an update was lost", s.from, other.doc, s.doc)
		}
		byFrom[s.from] = s
		if seenTo[s.to] {
			c.Fatalf("two successful saves returned version %d", s.to)
		}
		seenTo[s.to] = true
		require.Greater(c, s.to, s.from, "a save at version %d returned version %d", s.from, s.to)
	}
	docAt := map[int64]string{seed: seedDoc}
	cur := seed
	for i := 0; i < len(saves); i++ {
		s, ok := byFrom[cur]
		if !ok {
			c.Fatalf("the successful saves do not form one chain: %d of %d follow from the created version %d, none saved at version %d", i, len(saves), seed, cur)
		}
		docAt[s.to] = s.doc
		cur = s.to
	}
	doc, v, err := handles[1].LoadCheckpoint(ctx, ckptName)
	require.NoError(c, err)
	require.Equal(c, cur, v, "the final version is the last successful save's (%d successful saves, %d conflicts)", len(saves), conflicts)
	require.Equal(c, docAt[cur], string(doc), "the final document is the last successful save's")
	for _, l := range loads {
		want, ok := docAt[l.version]
		require.True(c, ok, "a load returned version %d, which no save returned", l.version)
		require.Equal(c, want, l.doc, "a load returned version %d with another save's document", l.version)
	}
	c.Logf("%d saves, %d conflicts, final version %d", len(saves), conflicts, v)
}

// clauseCheckpointIsolated: checkpoints belong to their session (ids
// built to escape a naive key layout), names are opaque (a name is never
// a pattern or a path), and Clear keeps a session's checkpoints while it
// removes its items.
func clauseCheckpointIsolated(c *suite.C) {
	ctx := c.Context()
	base := c.ID("ci")
	ids := []string{base, base + ":", base + ":b", base + "{x}", base + "}:{x", base + "*", base + "**",
		base + "%", base + "' OR '1'='1", base + "\x00", base + "/../x", base + "-ünïcødé-☃-😀"}
	names := []string{"run", "run/1", "run/1/", "run*", "x:y", "x", "*", "{x}", "%", ".."}
	docFor := func(i int, name string) []byte { return []byte(fmt.Sprintf(`{"session":%d,"name":%q}`, i, name)) }
	// Every third session holds no checkpoint; the others hold each name.
	holds := func(i int) bool { return i%3 != 1 }
	stores := make([]session.CheckpointStore, len(ids))
	versions := make([]map[string]int64, len(ids))
	for i, id := range ids {
		stores[i] = checkpointStore(c, c.Open(id))
		versions[i] = map[string]int64{}
		if !holds(i) {
			continue
		}
		for _, name := range names {
			versions[i][name] = saveCkpt(c, stores[i], name, docFor(i, name), 0, fmt.Sprintf("create %q in session %q", name, id))
		}
	}
	check := func(what string) {
		c.Helper()
		for i, id := range ids {
			peer := checkpointStore(c, c.OpenPeer(id))
			var want []string
			for name := range versions[i] {
				want = append(want, name)
			}
			requireNames(c, peer, want, fmt.Sprintf("%s: session %q", what, id))
			for _, name := range names {
				if v, ok := versions[i][name]; ok {
					requireCkpt(c, peer, name, docFor(i, name), v, fmt.Sprintf("%s: session %q", what, id))
				} else {
					requireNoCkpt(c, peer, name, fmt.Sprintf("%s: session %q holds no %q", what, id, name))
				}
			}
		}
	}
	check("after the creates")

	// Deleting a name that reads as a pattern or a prefix deletes that
	// name only, of that session only.
	for _, name := range []string{"*", "run", "x"} {
		require.NoError(c, stores[0].DeleteCheckpoint(ctx, name, versions[0][name]), "delete %q", name)
		delete(versions[0], name)
	}
	// A save in one session leaves its neighbours' versions as they are.
	versions[2]["run/1"] = saveCkpt(c, stores[2], "run/1", docFor(2, "run/1"), versions[2]["run/1"], "save again")
	check("after deletes and saves in two sessions")

	// Clear removes the items and keeps the checkpoints.
	s := c.Open(ids[3])
	p := c.OpenPeer(ids[3])
	add(c, s, numbered("ci", 3))
	require.NoError(c, s.Clear(ctx))
	require.Empty(c, all(c, p), "clear removes the items")
	check("after a clear")
	v := saveCkpt(c, checkpointStore(c, p), "run", docFor(3, "run"), versions[3]["run"], "save after a clear at the version kept")
	versions[3]["run"] = v
	add(c, p, numbered("after", 1))
	requireItems(c, numbered("after", 1), all(c, s), "items appended after a clear")

	for i := range ids {
		for name, v := range versions[i] {
			require.NoError(c, stores[i].DeleteCheckpoint(ctx, name, v), "delete %q of session %q", name, ids[i])
		}
		versions[i] = map[string]int64{}
	}
	check("after deleting every checkpoint")
}

// clauseCheckpointTTL: on a session that expires, its checkpoints expire
// with its data, a save restarts the clock of the whole session, and a
// write to the session restarts the checkpoints'.
func clauseCheckpointTTL(c *suite.C) {
	th, ok := c.Harness().(suite.TTLHarness)
	if !ok {
		c.Fatalf("ttl is declared but the harness does not implement TTLHarness")
	}
	m := th.MinTTL()
	ttl := 4 * m
	s, th := openTTL(c, ttl)
	only, err := th.OpenTTL(c.Context(), c.ID("ttl-only"), ttl)
	require.NoError(c, err)
	cs, co := checkpointStore(c, s), checkpointStore(c, only)
	defer func() {
		// The TTL store may be one the suite's cleanup does not reach.
		ctx := context.WithoutCancel(c.Context())
		for _, x := range []session.CheckpointStore{cs, co} {
			_ = x.DeleteCheckpoint(ctx, ckptName, session.AnyVersion)
			_ = x.Clear(ctx)
		}
	}()
	e, ok := s.(session.Expirer)
	require.True(c, ok, "ttl is declared but the session is not a session.Expirer")

	// Checkpoints expire with the data, and with nothing but checkpoints.
	add(c, s, numbered("a", 2))
	v1 := saveCkpt(c, cs, ckptName, []byte(`{"phase":1}`), 0, "create")
	saveCkpt(c, co, ckptName, []byte(`{"phase":"only"}`), 0, "create in a session with no items")
	d, ok, err := e.ExpiresIn(c.Context())
	require.NoError(c, err)
	require.True(c, ok, "a session with items and a checkpoint reports its expiry")
	require.True(c, d > 0 && d <= ttl, "expires in %v, want (0, %v]", d, ttl)
	if eo, isExpirer := only.(session.Expirer); isExpirer {
		d, ok, err := eo.ExpiresIn(c.Context())
		require.NoError(c, err)
		require.True(c, ok, "a session holding only a checkpoint reports its expiry")
		require.True(c, d > 0 && d <= ttl, "expires in %v, want (0, %v]", d, ttl)
	}
	th.Advance(ttl + m)
	require.Empty(c, all(c, s), "the items expire")
	requireNoCkpt(c, cs, ckptName, "the checkpoint expires with the session's items")
	requireNames(c, cs, nil, "after expiry")
	requireNoCkpt(c, co, ckptName, "a session holding only a checkpoint expires too")
	_, err = cs.SaveCheckpoint(c.Context(), ckptName, []byte(`{"phase":"stale"}`), v1)
	requireConflict(c, err, "save at the version of an expired checkpoint")

	// A save restarts the clock of the whole session, items included.
	add(c, s, numbered("b", 2))
	th.Advance(ttl / 2)
	doc2 := []byte(`{"phase":2}`)
	v2 := saveCkpt(c, cs, ckptName, doc2, 0, "create after expiry")
	th.Advance(ttl/2 + m)
	requireItems(c, numbered("b", 2), all(c, s), "a checkpoint save restarts the expiry of the session's items")
	requireCkpt(c, cs, ckptName, doc2, v2, "saved half a TTL ago")

	// A write to the session restarts the checkpoints' clock.
	add(c, s, numbered("c", 1))
	th.Advance(ttl / 2)
	requireCkpt(c, cs, ckptName, doc2, v2, "an append restarts the expiry of the session's checkpoints")
	require.Len(c, all(c, s), 3)

	th.Advance(ttl + m)
	require.Empty(c, all(c, s), "everything expires together at last")
	requireNoCkpt(c, cs, ckptName, "everything expires together at last")
}

// clauseCommitAtomic: AppendWithCheckpoint appends the batch and saves the
// document; a conflict, a rejected batch or a cancelled call writes
// neither; an empty batch only saves the document.
func clauseCommitAtomic(c *suite.C) {
	ctx := c.Context()
	s := c.Fresh("commit")
	cc := checkpointCommitter(c, s)
	ps := checkpointStore(c, c.OpenPeer(s.SessionID()))
	p := session.Session(ps)
	commit := func(items []session.Item, name string, doc []byte, version int64, what string) int64 {
		c.Helper()
		v, err := cc.AppendWithCheckpoint(ctx, items, name, doc, version)
		require.NoError(c, err, what)
		require.Greater(c, v, int64(0), "%s: returns a version of at least 1", what)
		if version > 0 {
			require.Greater(c, v, version, "%s: advances the version", what)
		}
		return v
	}
	want := numbered("pre", 2)
	add(c, s, want)

	doc1 := []byte(`{"settled":1}`)
	v1 := commit(numbered("b1", 3), ckptName, doc1, 0, "commit creating the checkpoint")
	want = append(want, numbered("b1", 3)...)
	requireItems(c, want, all(c, p), "the batch is appended after the history")
	requireCkpt(c, ps, ckptName, doc1, v1, "the commit's checkpoint")

	doc2 := []byte(`{"settled":2,"text":"caf\u00e9 é"}`)
	v2 := commit(numbered("b2", 2), ckptName, doc2, v1, "commit at the loaded version")
	want = append(want, numbered("b2", 2)...)
	requireItems(c, want, all(c, p))
	requireCkpt(c, ps, ckptName, doc2, v2, "the second commit's checkpoint")

	// Nothing is written by a commit that fails.
	fail := func(err error, is error, what string) {
		c.Helper()
		require.Truef(c, errors.Is(err, is), "%s: want %v, got %v", what, is, err)
		requireItems(c, want, all(c, p), "%s appends nothing", what)
		requireCkpt(c, ps, ckptName, doc2, v2, what+" saves nothing")
		requireNames(c, ps, []string{ckptName}, what+" creates no checkpoint")
	}
	_, err := cc.AppendWithCheckpoint(ctx, numbered("stale", 4), ckptName, []byte(`{"stale":true}`), v1)
	fail(err, session.ErrCheckpointConflict, "a commit at a stale version")
	_, err = cc.AppendWithCheckpoint(ctx, numbered("create", 1), ckptName, []byte(`{"create":true}`), 0)
	fail(err, session.ErrCheckpointConflict, "a commit creating (version 0) an existing checkpoint")
	_, err = cc.AppendWithCheckpoint(ctx, numbered("ghost", 1), "other", []byte(`{"ghost":true}`), 5)
	fail(err, session.ErrCheckpointConflict, "a commit at version 5 of a missing checkpoint")
	good := numbered("bad", 2)
	_, err = cc.AppendWithCheckpoint(ctx, []session.Item{good[0], {}, good[1]}, ckptName, []byte(`{"bad":true}`), v2)
	fail(err, session.ErrInvalidItem, "a commit of a batch with a zero item")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = cc.AppendWithCheckpoint(cctx, numbered("cancelled", 2), ckptName, []byte(`{"cancelled":true}`), v2)
	fail(err, context.Canceled, "a commit with a cancelled context")

	// An empty batch only saves the checkpoint.
	doc3 := []byte(`{"settled":3}`)
	v3 := commit(nil, ckptName, doc3, v2, "commit of no items")
	requireItems(c, want, all(c, p), "an empty commit appends nothing")
	requireCkpt(c, ps, ckptName, doc3, v3, "an empty commit saves its checkpoint")
	doc4 := []byte(`{"settled":4}`)
	v4 := commit([]session.Item{}, ckptName, doc4, v3, "commit of an empty batch")
	requireItems(c, want, all(c, p))
	requireCkpt(c, ps, ckptName, doc4, v4, "an empty batch saves its checkpoint")

	// Commits and plain saves share the versions; AnyVersion commits
	// unconditionally.
	v5 := saveCkpt(c, ps, ckptName, []byte(`{"saved":5}`), v4, "a plain save after commits")
	_, err = cc.AppendWithCheckpoint(ctx, numbered("late", 1), ckptName, []byte(`{"late":true}`), v4)
	requireConflict(c, err, "a commit at the version a plain save replaced")
	doc6 := []byte(`{"settled":6}`)
	v6 := commit(numbered("any", 1), ckptName, doc6, session.AnyVersion, "commit at AnyVersion")
	require.Greater(c, v6, v5)
	want = append(want, numbered("any", 1)...)
	requireItems(c, want, all(c, p))
	requireCkpt(c, ps, ckptName, doc6, v6, "the AnyVersion commit's checkpoint")
	requireItems(c, want, all(c, s), "the committing handle reads the same history")

	// A commit in a fresh session creates both.
	fresh := c.Fresh("commit-fresh")
	fp := checkpointStore(c, c.OpenPeer(fresh.SessionID()))
	fv := commitOn(c, checkpointCommitter(c, fresh), numbered("f", 2), []byte(`{"fresh":1}`))
	requireItems(c, numbered("f", 2), all(c, fp), "a commit in a fresh session appends its batch")
	requireCkpt(c, fp, ckptName, []byte(`{"fresh":1}`), fv, "a commit in a fresh session")
}

// commitOn commits items with doc, creating the checkpoint.
func commitOn(c *suite.C, cc session.CheckpointCommitter, items []session.Item, doc []byte) int64 {
	c.Helper()
	v, err := cc.AppendWithCheckpoint(c.Context(), items, ckptName, doc, 0)
	require.NoError(c, err, "commit creating the checkpoint")
	require.Greater(c, v, int64(0), "a commit returns a version of at least 1")
	return v
}

// Observed-atomically shape: the writer commits ckptObsBatches batches of
// ckptObsBatchSize items, each with the checkpoint {"n":k} after its k-th.
const (
	ckptObsBatches   = 40
	ckptObsBatchSize = 3
)

// clauseCommitObserved: while one goroutine commits batches, each with a
// checkpoint saying how many it has committed, readers on the peer handle
// see both or neither: a checkpoint loaded before the items never says
// more batches than the items then hold, and items read before the
// checkpoint never hold more batches than it then says. An append and a
// save made one after the other show the gap to one reader or the other.
func clauseCommitObserved(c *suite.C) {
	ctx := c.Context()
	id := c.ID("commit-observed")
	cc := checkpointCommitter(c, c.Open(id))
	peer := c.OpenPeer(id)
	ps := checkpointStore(c, peer)
	batch := func(k int) []session.Item { return numbered(fmt.Sprintf("k%d", k), ckptObsBatchSize) }
	var expected []string
	for k := 1; k <= ckptObsBatches; k++ {
		expected = append(expected, suite.Texts(batch(k))...)
	}

	var (
		stop  atomic.Bool
		mu    sync.Mutex
		bad   []string
		wg    sync.WaitGroup
		reads [2]atomic.Int64
	)
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(bad) < 3 {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
		stop.Store(true)
	}
	// loadN returns the batches the checkpoint says were committed.
	loadN := func() (int, bool) {
		doc, _, err := ps.LoadCheckpoint(ctx, ckptName)
		if errors.Is(err, session.ErrNoCheckpoint) {
			return 0, true
		}
		if err != nil {
			report("load during commits: %v", err)
			return 0, false
		}
		var d struct {
			N *int `json:"n"`
		}
		if err := json.Unmarshal(doc, &d); err != nil || d.N == nil || *d.N < 1 || *d.N > ckptObsBatches {
			report("the checkpoint read during commits is not one the writer saved: %q", doc)
			return 0, false
		}
		return *d.N, true
	}
	// readBatches returns the batches the items hold.
	readBatches := func() (int, bool) {
		items, err := peer.Items(ctx)
		if err != nil {
			report("read during commits: %v", err)
			return 0, false
		}
		got := suite.Texts(items)
		if len(got)%ckptObsBatchSize != 0 || len(got) > len(expected) || !slices.Equal(got, expected[:len(got)]) {
			report("a read during commits saw %d items that are not whole batches in order: %q", len(got), got)
			return 0, false
		}
		return len(got) / ckptObsBatchSize, true
	}
	wg.Add(2)
	go func() { // (a) the checkpoint, then the items
		defer wg.Done()
		for !stop.Load() {
			n, ok := loadN()
			if !ok {
				return
			}
			m, ok := readBatches()
			if !ok {
				return
			}
			if m < n {
				report("the checkpoint said %d batches were committed, and the items read after it hold %d: the checkpoint was saved before its batch was appended", n, m)
				return
			}
			reads[0].Add(1)
			runtime.Gosched()
		}
	}()
	go func() { // (b) the items, then the checkpoint
		defer wg.Done()
		for !stop.Load() {
			m, ok := readBatches()
			if !ok {
				return
			}
			n, ok := loadN()
			if !ok {
				return
			}
			if n < m {
				report("the items held %d batches, and the checkpoint loaded after them says %d: the batch was appended before its checkpoint was saved", m, n)
				return
			}
			reads[1].Add(1)
			runtime.Gosched()
		}
	}()
	// awaitReads waits (briefly) until each reader has read once more than
	// it had, so the readers run all along the commits.
	awaitReads := func() {
		r0, r1 := reads[0].Load(), reads[1].Load()
		deadline := time.Now().Add(200 * time.Millisecond)
		for !stop.Load() && (reads[0].Load() <= r0 || reads[1].Load() <= r1) && time.Now().Before(deadline) {
			runtime.Gosched()
		}
	}
	var (
		werr error
		v    int64
	)
	awaitReads()
	for k := 1; k <= ckptObsBatches && !stop.Load(); k++ {
		if v, werr = cc.AppendWithCheckpoint(ctx, batch(k), ckptName, []byte(fmt.Sprintf(`{"n":%d}`, k)), v); werr != nil {
			werr = fmt.Errorf("commit %d: %w", k, werr)
			break
		}
		awaitReads()
	}
	stop.Store(true)
	wg.Wait()
	require.NoError(c, werr)
	require.Empty(c, bad, "a reader saw a commit half done")
	require.NoError(c, ctx.Err())
	require.Equal(c, expected, suite.Texts(all(c, peer)), "after the commits the session holds every batch, in order")
	requireCkpt(c, ps, ckptName, []byte(fmt.Sprintf(`{"n":%d}`, ckptObsBatches)), v, "after the commits")
	c.Logf("%d + %d reads during %d commits", reads[0].Load(), reads[1].Load(), ckptObsBatches)
}
