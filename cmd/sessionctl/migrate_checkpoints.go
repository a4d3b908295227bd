package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentsessions/sessions/session"
)

// cpResult counts a session's checkpoints migrate saved at the
// destination, and those it found there already, byte for byte.
type cpResult struct{ copied, present int }

// rawCheckpoint is a checkpoint as the source stores it: its document's
// bytes, exactly, and its version there.
type rawCheckpoint struct {
	name    string
	doc     []byte
	version int64
}

// cpCopy is the plan for the checkpoints of one session: those of the
// source, read before the items, and which of them the destination lacks.
type cpCopy struct {
	id     string
	src    session.CheckpointStore // nil when the source keeps none
	dst    session.CheckpointStore
	all    []rawCheckpoint
	toSave []rawCheckpoint
	saved  map[string]int64 // name: the version this run saved it at
}

// planCheckpoints reads the checkpoints of session id at the source, with
// the raw session (no keys: the document's bytes are copied as stored,
// encrypted or not), and checks the destination can take them: it keeps
// checkpoints (session.CheckpointStore), and holds under each name
// either nothing or the same bytes. Otherwise the session is refused
// before anything is written: a destination never loses the approval a
// checkpoint holds, and never has one overwritten.
func planCheckpoints(ctx context.Context, m migration, id string) (*cpCopy, error) {
	p := &cpCopy{id: id, saved: map[string]int64{}}
	rs, err := m.src.Session(id)
	if err != nil {
		return nil, err
	}
	src, ok := rs.(session.CheckpointStore)
	if !ok {
		return p, nil
	}
	p.src = src
	if p.all, err = readRawCheckpoints(ctx, src); err != nil {
		return nil, fmt.Errorf("read the source's checkpoints: %w", err)
	}
	if len(p.all) == 0 {
		return p, nil
	}
	rd, err := m.dst.Session(id)
	if err != nil {
		return nil, err
	}
	dst, ok := rd.(session.CheckpointStore)
	if !ok {
		return nil, fmt.Errorf("the destination cannot keep checkpoints (its sessions are not session.CheckpointStore), and this session holds %s (%s): migrating it would leave them behind; nothing written (migrate to a store that keeps checkpoints)",
			plural(len(p.all), "checkpoint", "checkpoints"), cpNames(p.all))
	}
	p.dst = dst
	for _, c := range p.all {
		doc, v, err := dst.LoadCheckpoint(ctx, c.name)
		switch {
		case errors.Is(err, session.ErrNoCheckpoint):
			p.toSave = append(p.toSave, c)
		case err != nil:
			return nil, fmt.Errorf("read the destination's checkpoint %s: %w", quoteID(c.name), err)
		case !bytes.Equal(doc, c.doc):
			return nil, fmt.Errorf("the destination already holds a different checkpoint %s (version %d, %d bytes; the source's: version %d, %d bytes): not overwritten, nothing written (inspect both; delete the destination's if it is stale, then run migrate again)",
				quoteID(c.name), v, len(doc), c.version, len(c.doc))
		}
	}
	return p, nil
}

// save stores the checkpoints the destination lacks, each with version 0
// ("none stored"): one that appeared there since the plan (something
// writes to the destination) is not overwritten, and fails the session.
func (p *cpCopy) save(ctx context.Context) (cpResult, error) {
	res := cpResult{present: len(p.all) - len(p.toSave)}
	for _, c := range p.toSave {
		v, err := p.dst.SaveCheckpoint(ctx, c.name, c.doc, 0)
		if errors.Is(err, session.ErrCheckpointConflict) {
			return res, fmt.Errorf("a checkpoint %s appeared at the destination during the copy (something writes to it): not overwritten; %s; run migrate again", quoteID(c.name), p.savedNote())
		}
		if err != nil {
			return res, fmt.Errorf("write the checkpoint %s: %w; %s", quoteID(c.name), err, p.savedNote())
		}
		p.saved[c.name] = v
		res.copied++
	}
	return res, nil
}

// savedNote says which checkpoints this run saved before it failed.
func (p *cpCopy) savedNote() string {
	if len(p.saved) == 0 {
		return "no checkpoint saved"
	}
	names := make([]string, 0, len(p.saved))
	for n := range p.saved {
		names = append(names, quoteID(n))
	}
	slices.Sort(names)
	return "saved " + strings.Join(names, ", ")
}

// sourceUnchanged reports errSourceChanged when the source's checkpoints
// moved during the copy (a run saved, claimed, finished): the copies this
// run saved are deleted again (at the version it saved them, so a writer
// of the destination loses nothing), and a rerun copies what the source
// holds then.
func (p *cpCopy) sourceUnchanged(ctx context.Context) error {
	if p.src == nil {
		return nil
	}
	now, err := readRawCheckpoints(ctx, p.src)
	if err != nil {
		return fmt.Errorf("read the source's checkpoints again after the copy: %w", err)
	}
	same := len(now) == len(p.all)
	for i := 0; same && i < len(now); i++ {
		same = now[i].name == p.all[i].name && now[i].version == p.all[i].version
	}
	if same {
		return nil
	}
	var left []string
	for name, v := range p.saved {
		if err := p.dst.DeleteCheckpoint(ctx, name, v); err != nil {
			left = append(left, quoteID(name))
		}
	}
	msg := "the copies saved are deleted again"
	if len(left) > 0 {
		slices.Sort(left)
		msg = "the copies of " + strings.Join(left, ", ") + " could not be deleted again (they changed at the destination)"
	}
	return fmt.Errorf("%w: its checkpoints changed while they were copied; %s; run migrate again", errSourceChanged, msg)
}

// readRawCheckpoints returns the checkpoints cs keeps, sorted by name, as
// stored.
func readRawCheckpoints(ctx context.Context, cs session.CheckpointStore) ([]rawCheckpoint, error) {
	names, err := cs.ListCheckpoints(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]rawCheckpoint, 0, len(names))
	for _, name := range names {
		doc, v, err := cs.LoadCheckpoint(ctx, name)
		if errors.Is(err, session.ErrNoCheckpoint) {
			continue // deleted since it was listed
		}
		if err != nil {
			return nil, fmt.Errorf("checkpoint %s: %w", quoteID(name), err)
		}
		out = append(out, rawCheckpoint{name: name, doc: doc, version: v})
	}
	return out, nil
}

func cpNames(cps []rawCheckpoint) string {
	names := make([]string, len(cps))
	for i, c := range cps {
		names[i] = quoteID(c.name)
	}
	return strings.Join(names, ", ")
}
