package legacy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/legacy"
	"github.com/agentsessions/sessions/session"
)

// chatLog is a session of github.com/nlpodyssey/openai-agents-go's shape,
// as code written for that library has them (the session is, for example,
// its memory.SQLiteSession), over json.RawMessage items, which keep every
// item byte for byte.
type chatLog struct {
	id    string
	mu    sync.Mutex
	items []json.RawMessage
}

func (c *chatLog) SessionID(context.Context) string { return c.id }
func (c *chatLog) GetItems(_ context.Context, limit int) ([]json.RawMessage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if limit <= 0 || limit > len(c.items) { // <= 0 means all
		limit = len(c.items)
	}
	return append([]json.RawMessage(nil), c.items[len(c.items)-limit:]...), nil
}
func (c *chatLog) AddItems(_ context.Context, items []json.RawMessage) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items = append(c.items, items...)
	return nil
}
func (c *chatLog) PopItem(context.Context) (*json.RawMessage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.items) == 0 {
		return nil, nil // nil when empty
	}
	last := c.items[len(c.items)-1]
	c.items = c.items[:len(c.items)-1]
	return &last, nil
}
func (c *chatLog) ClearSession(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items = nil
	return nil
}

func ExampleFromLimitSession() {
	ctx := context.Background()
	// Over openai-go's responses.ResponseInputItemUnionParam, pass
	// integrations/openaigo's Codec: JSONCodec loses items there.
	s := legacy.FromLimitSession[json.RawMessage](&chatLog{id: "chat-1"}, nil)

	err := session.Append(ctx, s, []session.Item{
		session.MustItem(`{"role":"user","content":"hi"}`),
		session.MustItem(`{"role":"assistant","content":"hello"}`),
		session.MustItem(`{"role":"user","content":"bye"}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	latest, _ := session.Latest(ctx, s, 2) // GetItems(ctx, 2)
	fmt.Println("latest 2:", latest)
	none, _ := session.Latest(ctx, s, 0) // no call: 0 means none here, all there
	fmt.Println("latest 0:", none)
	_, err = session.Latest(ctx, s, -1) // no call: an error here, all there
	fmt.Println("latest -1:", err)
	it, ok, _ := s.PopItem(ctx)
	fmt.Println("popped:", it, ok)
	all, _ := s.Items(ctx) // GetItems(ctx, 0)
	fmt.Println("all:", all)
	fmt.Println("capabilities:", session.Probe(s))
	// Output:
	// latest 2: [{"role":"assistant","content":"hello"} {"role":"user","content":"bye"}]
	// latest 0: []
	// latest -1: session: limit must not be negative: -1
	// popped: {"role":"user","content":"bye"} true
	// all: [{"role":"user","content":"hi"} {"role":"assistant","content":"hello"}]
	// capabilities: latest
}

func ExampleToLimitSession() {
	ctx := context.Background()
	ours, _ := memory.NewSession("chat-2")
	// Hand our session to code written for nlpodyssey's shape.
	theirs := legacy.ToLimitSession[json.RawMessage](ours, nil)

	_ = theirs.AddItems(ctx, []json.RawMessage{
		json.RawMessage(`{"role":"user","content":"one"}`),
		json.RawMessage(`{"role":"user","content":"two"}`),
	})
	for _, limit := range []int{1, 0, -1} {
		items, _ := theirs.GetItems(ctx, limit) // <= 0 means all
		fmt.Printf("GetItems(%d): %d items\n", limit, len(items))
	}
	for range 3 {
		p, _ := theirs.PopItem(ctx)
		if p == nil {
			fmt.Println("popped: nil (empty)")
			continue
		}
		fmt.Println("popped:", string(*p))
	}
	// Output:
	// GetItems(1): 1 items
	// GetItems(0): 2 items
	// GetItems(-1): 2 items
	// popped: {"role":"user","content":"two"}
	// popped: {"role":"user","content":"one"}
	// popped: nil (empty)
}

// notebook is a session written before contexts were threaded through.
type notebook struct {
	id    string
	items []session.Item
}

func (n *notebook) SessionID() string              { return n.id }
func (n *notebook) Items() ([]session.Item, error) { return append([]session.Item{}, n.items...), nil }
func (n *notebook) AddItems(items []session.Item) error {
	n.items = append(n.items, items...)
	return nil
}
func (n *notebook) PopItem() (session.Item, bool, error) {
	if len(n.items) == 0 {
		return session.Item{}, false, nil
	}
	last := n.items[len(n.items)-1]
	n.items = n.items[:len(n.items)-1]
	return last, true, nil
}
func (n *notebook) Clear() error { n.items = nil; return nil }

func ExampleFromPlain() {
	s := legacy.FromPlain(&notebook{id: "chat-3"})

	ctx := context.Background()
	_ = s.AddItems(ctx, []session.Item{session.MustItem(`{"role":"user","content":"kept"}`)})

	// A context already done stops the call before the notebook is touched.
	done, cancel := context.WithCancel(ctx)
	cancel()
	err := s.AddItems(done, []session.Item{session.MustItem(`{"role":"user","content":"lost"}`)})
	fmt.Println("cancelled:", err)

	items, _ := session.Latest(ctx, s, 5) // no LatestReader: reads all, keeps the newest 5
	fmt.Println(items)
	// Output:
	// cancelled: context canceled
	// [{"role":"user","content":"kept"}]
}
