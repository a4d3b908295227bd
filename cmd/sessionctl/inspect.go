package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

func init() {
	commands["inspect"] = command{"print a session's history and its health", runInspect}
}

func runInspect(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "inspect", "URL SESSION_ID")
	limit := fs.Int("limit", 0, "show only the newest N items (0: all)")
	asJSON := fs.Bool("json", false, "print items, problems and corrupt records as JSON")
	width := fs.Int("width", 100, "truncate each item to this many characters (0: no limit)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("want a store URL and a session id")
	}
	if *limit < 0 {
		return usagef("-limit must not be negative")
	}
	st, corrupt, err := openStore(ctx, pos[0])
	if err != nil {
		return err
	}
	defer st.Close()
	s, err := st.Session(pos[1])
	if err != nil {
		return err
	}
	var items []session.Item
	if *limit > 0 {
		items, err = session.Latest(ctx, s, *limit)
	} else {
		items, err = session.All(ctx, s)
	}
	if err != nil {
		return err
	}
	problems := history.Diagnose(items)
	bad := corrupt.Reports(pos[1])
	if *asJSON {
		type corruptJSON struct {
			Position string `json:"position"`
			Raw      string `json:"raw"`
			Error    string `json:"error"`
		}
		cj := make([]corruptJSON, len(bad))
		for i, r := range bad {
			cj[i] = corruptJSON{r.Position, string(r.Raw), fmt.Sprint(r.Err)}
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{
			"session_id": pos[1], "items": items, "problems": problems, "corrupt_records": cj,
			"capabilities": session.Probe(s).String(),
		})
	}
	fmt.Fprintf(e.stdout, "session %q: %s (capabilities: %s)\n", pos[1], plural(len(items), "item", "items"), session.Probe(s))
	byIndex := map[int][]string{}
	for _, p := range problems {
		byIndex[p.Index] = append(byIndex[p.Index], string(p.Kind))
	}
	for i, it := range items {
		mark := ""
		if ks := byIndex[i]; len(ks) > 0 {
			mark = "  <- " + strings.Join(ks, ", ")
		}
		fmt.Fprintf(e.stdout, "%5d  %-24s %s%s\n", i, label(it), truncate(it.String(), *width), mark)
	}
	for _, r := range bad {
		fmt.Fprintf(e.stdout, "corrupt record at %s (%d bytes): %v\n", r.Position, len(r.Raw), r.Err)
	}
	fmt.Fprintf(e.stdout, "%s, %s\n", plural(len(problems), "problem", "problems"), plural(len(bad), "corrupt record", "corrupt records"))
	return nil
}

// label names an item by its type, or its role for a bare message.
func label(it session.Item) string {
	t := it.Type()
	if t == "" {
		t = "message"
	}
	if r := it.Role(); r != "" {
		return t + "/" + r
	}
	if id := it.CallID(); id != "" {
		return t + " " + truncate(id, 12)
	}
	return t
}

func truncate(s string, n int) string {
	if n <= 0 || len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
