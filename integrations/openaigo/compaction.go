package openaigo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/internal/capwrap"
	"github.com/agentsessions/sessions/session"
)

// DefaultCompactionModel is the model a compaction session asks when
// CompactionOptions.Model is empty (the Python SDK's default).
const DefaultCompactionModel = "gpt-4.1"

// DefaultCompactionThreshold is the number of candidate items (every item
// but user messages and compaction items) at which the default trigger
// compacts.
const DefaultCompactionThreshold = 10

// ErrServerHistory is returned by NewCompactionSession for a session whose
// history the API keeps and rewrites (one reporting
// session.IDInsensitive, as a ConversationsSession does): its history is
// not ours to replace.
var ErrServerHistory = errors.New("openaigo: a compaction session cannot wrap a session whose history the API keeps")

// ErrCompactionModel is returned by NewCompactionSession for a model name
// that is not an OpenAI model (gpt-*, o<digit>*, ft:gpt-*).
var ErrCompactionModel = errors.New("openaigo: unsupported model for responses compaction")

// CompactionOptions configure a compaction session.
type CompactionOptions struct {
	// Model is the model of the compact requests; empty means
	// DefaultCompactionModel.
	Model string
	// Mode is the default mode; empty means session.CompactionAuto:
	// previous_response_id when the last response was stored, input
	// otherwise (or when no response id is known).
	Mode session.CompactionMode
	// ShouldCompact decides, after a turn, whether to compact; nil means
	// at least DefaultCompactionThreshold candidates.
	ShouldCompact func(CompactionContext) bool
	// Attempts bounds the compact requests one compaction sends when the
	// history is rewritten under it (a pop, a clear, another compaction);
	// an append beside it never costs another request. 0 means 3. When they
	// are spent the compaction is deferred and the next one is forced.
	Attempts int
	// RequestOptions are added to every compact request.
	RequestOptions []option.RequestOption
	// Observe, if set, is told what each compaction did.
	Observe func(CompactionReport)
}

// CompactionContext is what ShouldCompact decides on.
type CompactionContext struct {
	ResponseID string                 // the response the compaction follows; may be empty
	Mode       session.CompactionMode // resolved: previous_response_id or input
	Candidates []session.Item         // every item but user messages and compaction items
	Items      []session.Item         // the whole history
	// (Candidates and Items are the session's own: read them, do not
	// change their elements.)
}

// CompactionReport says what one compaction did.
type CompactionReport struct {
	ResponseID string
	Mode       session.CompactionMode
	Before     int // items compacted
	After      int // items stored after it, kept appends included
	Kept       int // items appended beside the compaction and kept after its output
	Requests   int // compact requests sent
	// Usage is the token usage the compact requests reported, summed (the
	// Python SDK adds it to the run's usage).
	Usage    responses.ResponseUsage
	Deferred bool // not replaced: the history kept changing, or it ends inside a turn
	Why      string
	// Fallback is true when the session cannot replace its history against
	// a version: the history was cleared and rewritten, Python's way.
	Fallback bool
}

// NewCompactionSession returns s wrapped so that it compacts its history
// with the Responses API's compact endpoint (client.Responses.Compact),
// as the Python and JS SDKs' OpenAIResponsesCompactionSession do: the
// runner (runstate.Run, or a loop of the caller's) calls RunCompaction
// after each saved turn, and ShouldCompact decides. The result keeps s's
// other capabilities.
//
// The compacted output (the user messages, then one compaction item)
// replaces the history atomically against the version it compacted
// (session.VersionedReplacer: SQLite, PostgreSQL, Redis, Mongo, memory,
// and the encrypted and otelsession wrappers over them). An append that
// lands beside the compaction, from this process or another, is kept
// after the compacted output when it starts a turn of its own; when it
// answers a call the compaction took, the compaction is sent again on the
// new history (at most Attempts requests) and otherwise deferred. A crash
// at any instant leaves the old history or the compacted one.
//
// Where s cannot replace against a version, the history is replaced
// Python's way, by session.Replace (an atomic ReplaceItems where s has
// one, else clear then add, restoring the old history on failure): an
// append beside it may then be lost, and a crash between the clear and
// the add leaves the session empty. CompactionReport.Fallback says so.
//
// The trigger counts what this value has seen: the history read once,
// then the appends made through it (as Python's does); items other
// processes append are counted at the next compaction, which always reads
// the stored history. A deferral (DeferCompaction) lives in this value,
// as Python's does.
//
// s must not report session.IDInsensitive (ErrServerHistory), and the
// model must be an OpenAI model (ErrCompactionModel).
func NewCompactionSession(s session.Session, client *openai.Client, opts CompactionOptions) (session.Session, error) {
	if client == nil {
		return nil, errors.New("openaigo: NewCompactionSession needs a client")
	}
	if capwrap.IgnoresIDs(s) {
		return nil, ErrServerHistory
	}
	if opts.Model == "" {
		opts.Model = DefaultCompactionModel
	}
	if !isOpenAIModel(opts.Model) {
		return nil, fmt.Errorf("%w: %q", ErrCompactionModel, opts.Model)
	}
	switch opts.Mode {
	case "":
		opts.Mode = session.CompactionAuto
	case session.CompactionAuto, session.CompactionInput, session.CompactionPreviousResponseID:
	default:
		return nil, fmt.Errorf("openaigo: unknown compaction mode %q", opts.Mode)
	}
	if opts.ShouldCompact == nil {
		opts.ShouldCompact = func(c CompactionContext) bool { return len(c.Candidates) >= DefaultCompactionThreshold }
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 3
	}
	c := &compacting{inner: s, client: client, opts: opts}
	p := capwrap.Of(s)
	p.Compaction, p.Deferrer = c.RunCompaction, c
	if p.Commit != nil {
		commit := p.Commit
		p.Commit = func(ctx context.Context, items []session.Item, name string, doc []byte, version int64) (int64, error) {
			v, err := commit(ctx, items, name, doc, version)
			c.appended(items, err)
			return v, err
		}
	}
	if p.Once != nil {
		once := p.Once
		p.Once = func(ctx context.Context, opID string, items []session.Item) (bool, error) {
			ok, err := once(ctx, opID, items)
			if err != nil || ok {
				c.appended(items, err)
			}
			return ok, err
		}
	}
	if p.Replace != nil {
		replace := p.Replace
		p.Replace = func(ctx context.Context, items []session.Item) error {
			defer c.forget()
			return replace(ctx, items)
		}
	}
	if p.Versioned != nil {
		p.Versioned = versionedForgetting{p.Versioned, c}
	}
	return capwrap.Compose(c, p), nil
}

// isOpenAIModel is the Python SDK's is_openai_model_name.
func isOpenAIModel(model string) bool {
	m := strings.TrimSpace(model)
	if m == "" {
		return false
	}
	root, _, _ := strings.Cut(strings.TrimPrefix(m, "ft:"), ":")
	return strings.HasPrefix(root, "gpt-") || (len(root) > 1 && root[0] == 'o' && root[1] >= '0' && root[1] <= '9')
}

// compacting is the compaction session's core.
type compacting struct {
	inner  session.Session
	client *openai.Client
	opts   CompactionOptions

	run sync.Mutex // one compaction at a time in this value

	mu         sync.Mutex
	seen       []session.Item // the history as this value knows it; nil: unknown
	candidates []session.Item
	responseID string
	unstored   string // the last response seen with store=false
	deferred   string
}

func (c *compacting) SessionID() string          { return c.inner.SessionID() }
func (c *compacting) AcceptsRunContext() bool    { return capwrap.AcceptsRunContext(c.inner) }
func (c *compacting) IgnoreIDsForMatching() bool { return false }

func (c *compacting) Items(ctx context.Context) ([]session.Item, error) {
	return session.All(ctx, c.inner)
}

func (c *compacting) AddItems(ctx context.Context, items []session.Item) error {
	err := c.inner.AddItems(ctx, items)
	c.appended(items, err)
	return err
}

func (c *compacting) PopItem(ctx context.Context) (session.Item, bool, error) {
	defer c.forget()
	return session.Pop(ctx, c.inner)
}

func (c *compacting) Clear(ctx context.Context) error {
	err := session.Clear(ctx, c.inner)
	c.mu.Lock()
	c.seen, c.candidates, c.deferred = nil, nil, ""
	c.mu.Unlock()
	return err
}

// appended counts items appended through this value; after an error
// whose outcome is unknown the history is read again when next needed.
func (c *compacting) appended(items []session.Item, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.seen == nil:
	case err != nil:
		c.seen, c.candidates = nil, nil
	default:
		c.seen = append(c.seen, items...)
		c.candidates = append(c.candidates, candidates(items)...)
	}
}

// forget makes the next trigger read the history again.
func (c *compacting) forget() {
	c.mu.Lock()
	c.seen, c.candidates = nil, nil
	c.mu.Unlock()
}

// known returns the history and candidates as this value knows them,
// reading the history if it does not.
func (c *compacting) known(ctx context.Context) (items, cands []session.Item, err error) {
	c.mu.Lock()
	if c.seen != nil {
		// Clipped, not copied: an append to them cannot reach ours, and
		// appended only grows ours, so the hook sees a stable prefix.
		items, cands = slices.Clip(c.seen), slices.Clip(c.candidates)
		c.mu.Unlock()
		return items, cands, nil
	}
	c.mu.Unlock()
	items, err = session.All(ctx, c.inner)
	if err != nil {
		return nil, nil, err
	}
	cands = candidates(items)
	c.mu.Lock()
	c.seen, c.candidates = slices.Clone(items), slices.Clone(cands)
	c.mu.Unlock()
	return slices.Clip(items), slices.Clip(cands), nil
}

// candidates are the items a compaction counts: all but user messages and
// compaction items.
func candidates(items []session.Item) []session.Item {
	var out []session.Item
	for _, it := range items {
		if !isUserMessage(it) && it.Type() != "compaction" {
			out = append(out, it)
		}
	}
	return out
}

// isUserMessage is the Python SDK's test of a user message.
func isUserMessage(it session.Item) bool {
	if it.Type() == "message" {
		return it.Role() == "user"
	}
	return it.Role() == "user" && it.HasField("content")
}

// mode resolves the mode for responseID as the Python SDK does.
func (c *compacting) mode(requested session.CompactionMode, responseID string, store *bool) session.CompactionMode {
	mode := requested
	if mode == "" {
		mode = c.opts.Mode
	}
	switch {
	case mode != session.CompactionAuto:
		return mode
	case store != nil && !*store, responseID == "":
		return session.CompactionInput
	case store == nil && responseID == c.unstored:
		return session.CompactionInput
	}
	return session.CompactionPreviousResponseID
}

// remember tracks the response id and its store setting, as
// run_compaction does.
func (c *compacting) remember(responseID string, store *bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if responseID != "" {
		c.responseID = responseID
	}
	switch {
	case store == nil:
	case !*store && c.responseID != "":
		c.unstored = c.responseID
	case *store && c.responseID == c.unstored:
		c.unstored = ""
	}
}

// RunCompaction compacts the history if args.Force or ShouldCompact says
// so (session.CompactionAware).
func (c *compacting) RunCompaction(ctx context.Context, args session.CompactionArgs) error {
	c.run.Lock()
	defer c.run.Unlock()
	c.remember(args.ResponseID, args.Store)
	c.mu.Lock()
	responseID := c.responseID
	mode := c.mode(args.Mode, responseID, args.Store)
	c.mu.Unlock()
	if mode == session.CompactionPreviousResponseID && responseID == "" {
		return errors.New("openaigo: previous_response_id compaction needs a response id")
	}
	items, cands, err := c.known(ctx)
	if err != nil {
		return fmt.Errorf("openaigo: compaction: %w", err)
	}
	if !args.Force && !c.opts.ShouldCompact(CompactionContext{ResponseID: responseID, Mode: mode, Candidates: cands, Items: items}) {
		return nil
	}
	c.mu.Lock()
	c.deferred = ""
	c.mu.Unlock()
	rep, err := c.compact(ctx, responseID, mode)
	if rep.Deferred || err != nil { // due again, forced, at the next turn
		c.mu.Lock()
		c.deferred = responseID
		c.mu.Unlock()
	}
	if c.opts.Observe != nil && (err == nil || rep.Requests > 0) {
		c.opts.Observe(rep)
	}
	return err
}

// DeferCompaction records that the compaction for responseID is due at the
// next turn, if ShouldCompact says so now (session.CompactionDeferrer).
func (c *compacting) DeferCompaction(ctx context.Context, responseID string, store *bool) error {
	c.mu.Lock()
	pending := c.deferred != ""
	mode := c.mode("", responseID, store)
	c.mu.Unlock()
	if pending {
		return nil
	}
	items, cands, err := c.known(ctx)
	if err != nil {
		return fmt.Errorf("openaigo: compaction: %w", err)
	}
	if c.opts.ShouldCompact(CompactionContext{ResponseID: responseID, Mode: mode, Candidates: cands, Items: items}) {
		c.mu.Lock()
		c.deferred = responseID
		c.mu.Unlock()
	}
	return nil
}

// DeferredCompaction returns the response id of a pending deferral
// (session.CompactionDeferrer).
func (c *compacting) DeferredCompaction() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deferred, c.deferred != ""
}

// compact sends compact requests until one's output replaces the history
// it compacted.
func (c *compacting) compact(ctx context.Context, responseID string, mode session.CompactionMode) (CompactionReport, error) {
	rep := CompactionReport{ResponseID: responseID, Mode: mode}
	_, versioned := c.inner.(session.VersionedReplacer)
	rep.Fallback = !versioned
	for rep.Requests < c.opts.Attempts {
		version, items, err := c.read(ctx, versioned)
		if err != nil {
			return rep, fmt.Errorf("openaigo: compaction: %w", err)
		}
		rep.Before = len(items)
		if why := openTurn(items); why != "" {
			rep.Deferred, rep.Why = true, why
			return rep, nil
		}
		rep.Requests++
		out, err := c.request(ctx, mode, responseID, items, &rep.Usage)
		if err != nil {
			return rep, fmt.Errorf("openaigo: compact: %w", err)
		}
		if mode == session.CompactionPreviousResponseID && !keepsUsers(out, items) {
			// The stored response did not see all of this history (a turn
			// another process appended before it was saved): compact what
			// is stored here instead, losing nothing.
			mode = session.CompactionInput
			continue
		}
		if !versioned {
			if err := session.Replace(ctx, c.inner, out); err != nil {
				c.forget()
				return rep, fmt.Errorf("openaigo: compaction: replace: %w", err)
			}
			rep.After = len(out)
			c.compacted(out)
			return rep, nil
		}
		kept, err := c.replace(ctx, version, items, out)
		switch {
		case err == nil:
			rep.Kept, rep.After = len(kept), len(out)+len(kept)
			c.compacted(append(out, kept...))
			return rep, nil
		case !errors.Is(err, session.ErrHistoryChanged):
			c.forget()
			return rep, fmt.Errorf("openaigo: compaction: replace: %w", err)
		}
		mode = session.CompactionInput // the stored response no longer is the history
	}
	rep.Deferred, rep.Why = true, "the history was rewritten under every attempt"
	return rep, nil
}

// read returns the history and the version it has.
func (c *compacting) read(ctx context.Context, versioned bool) (string, []session.Item, error) {
	if !versioned {
		items, err := session.All(ctx, c.inner)
		return "", items, err
	}
	for {
		v, err := session.Version(ctx, c.inner)
		if err != nil {
			return "", nil, err
		}
		items, err := session.All(ctx, c.inner)
		if err != nil {
			return "", nil, err
		}
		again, err := session.Version(ctx, c.inner)
		if err != nil {
			return "", nil, err
		}
		if again == v {
			return v, items, nil
		}
		if err := ctx.Err(); err != nil {
			return "", nil, err
		}
	}
}

// replace puts out in place of items if the history is still at version.
// When the history grew beside the compaction (items still its prefix)
// and what was appended starts a turn of its own, out is stored with the
// appended items after it. Otherwise the answer is ErrHistoryChanged and
// nothing was written.
func (c *compacting) replace(ctx context.Context, version string, items, out []session.Item) (kept []session.Item, err error) {
	for {
		err := session.ReplaceIf(ctx, c.inner, version, append(slices.Clip(out), kept...))
		if !errors.Is(err, session.ErrHistoryChanged) {
			return kept, err
		}
		v, now, rerr := c.read(ctx, true)
		if rerr != nil {
			return nil, errors.Join(err, rerr)
		}
		if len(now) < len(items) || !equalItems(now[:len(items)], items) || !standsAlone(now[len(items):]) {
			return nil, err
		}
		version, kept = v, now[len(items):]
	}
}

// compacted records the history a compaction stored.
func (c *compacting) compacted(items []session.Item) {
	c.mu.Lock()
	c.seen, c.candidates = slices.Clone(items), candidates(items)
	c.mu.Unlock()
}

// request sends one compact request and returns its output, normalised.
func (c *compacting) request(ctx context.Context, mode session.CompactionMode, responseID string, items []session.Item, usage *responses.ResponseUsage) ([]session.Item, error) {
	params := responses.ResponseCompactParams{Model: responses.ResponseCompactParamsModel(c.opts.Model)}
	if mode == session.CompactionPreviousResponseID {
		params.PreviousResponseID = openai.String(responseID)
	} else {
		params.Input.OfResponseInputItemArray = InputParams(items)
	}
	resp, err := c.client.Responses.Compact(ctx, params, c.opts.RequestOptions...)
	if err != nil {
		return nil, err
	}
	usage.InputTokens += resp.Usage.InputTokens
	usage.OutputTokens += resp.Usage.OutputTokens
	usage.TotalTokens += resp.Usage.TotalTokens
	out := make([]session.Item, 0, len(resp.Output))
	reasoning := false
	for i, o := range resp.Output {
		it, err := session.NewItem([]byte(o.RawJSON()))
		if err != nil {
			return nil, fmt.Errorf("output item %d: %w", i, err)
		}
		reasoning = reasoning || it.Type() == history.TypeReasoning
		out = append(out, it)
	}
	if !reasoning {
		// An assistant message's id names the reasoning item before it;
		// without that item the API refuses the id.
		for i, it := range out {
			if it.Type() == "message" && it.Role() == "assistant" && it.ID() != "" {
				if out[i], err = history.Without(it, "id"); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}

// keepsUsers reports whether out, a compaction's output, holds the text of
// every user message of items, in order: the API's output is "all user
// messages, then one compaction item" (in its own shape), so a user
// message of items missing from it was not in the response chain it
// compacted.
func keepsUsers(out, items []session.Item) bool {
	j := 0
	for _, it := range items {
		if !isUserMessage(it) {
			continue
		}
		text := userText(it)
		for j < len(out) && !(isUserMessage(out[j]) && userText(out[j]) == text) {
			j++
		}
		if j == len(out) {
			return false
		}
		j++
	}
	return true
}

// userText is the text of a user message: its content when a string,
// else its parts' texts, joined.
func userText(it session.Item) string {
	raw, _ := it.Field("content")
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return text
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// openTurn says why items cannot be compacted now, or "": a call still
// waits for its output (its output would come after the compaction,
// without its call), or the history ends on a reasoning item whose
// follower is still to come.
func openTurn(items []session.Item) string {
	for _, p := range history.Diagnose(items) {
		if p.Kind == history.ProblemUnansweredCall && p.Index >= lastUserMessage(items) {
			return fmt.Sprintf("call %s waits for its output", p.Key.ID)
		}
	}
	if n := len(items); n > 0 && items[n-1].Type() == history.TypeReasoning {
		return "the history ends on a reasoning item"
	}
	return ""
}

func lastUserMessage(items []session.Item) int {
	for i := len(items) - 1; i >= 0; i-- {
		if isUserMessage(items[i]) {
			return i
		}
	}
	return 0
}

// standsAlone reports whether items, appended beside a compaction, can
// follow its output: they start a turn of their own (with a user message)
// and answer no call outside them.
func standsAlone(items []session.Item) bool {
	if len(items) == 0 {
		return true
	}
	if !isUserMessage(items[0]) {
		return false
	}
	calls := map[history.PairKey]bool{}
	for _, it := range items {
		if k, ok := history.CallKey(it); ok {
			calls[k] = true
		}
		if k, ok := history.AnsweredKey(it); ok && !calls[k] {
			return false
		}
	}
	return true
}

// versionedForgetting is the wrapped session's VersionedReplacer: a
// replace makes the trigger read the history again.
type versionedForgetting struct {
	capwrap.Versioned
	c *compacting
}

func (v versionedForgetting) ReplaceItemsIf(ctx context.Context, version string, items []session.Item) error {
	defer v.c.forget()
	return v.Versioned.ReplaceItemsIf(ctx, version, items)
}

func equalItems(a, b []session.Item) bool {
	return slices.EqualFunc(a, b, session.Item.Equal)
}
