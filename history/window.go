package history

import (
	"context"
	"math"

	"github.com/agentsessions/sessions/session"
)

// All is the window size that means every item: ModelInput(ctx, s, All)
// and Window(history, All) take the whole history (a window of 0 takes
// none).
const All = math.MaxInt

// ModelInput returns the model input of the newest n items of s: the
// window made safe to send to the Responses API, which rejects an input
// that breaks any of these rules:
//
//   - An output needs its call: an output whose call fell outside the
//     window is dropped ("No tool call found for function call output"),
//     and so is a call whose output is missing. Outputs pair on call_id, or
//     for a local_shell_call_output without one on "id", as the API schema
//     names its call (see AnsweredKey).
//   - A reasoning item and the items after it, up to the next user,
//     developer or system message or the next reasoning item, belong to one
//     response: an item whose reasoning item fell outside the window is
//     dropped ("Item 'fc_1' of type 'function_call' was provided without
//     its required 'reasoning' item"), so the window starts later rather
//     than earlier and never grows past n; a reasoning item whose following
//     item is dropped or missing goes, and the rest of its response with it
//     ("'reasoning' was provided without its required following item").
//     To tell whether the window starts inside a response, ModelInput
//     reads n+1 items; only when the one before the window is inside a
//     response too does it read further back (doubling the read), to the
//     nearest reasoning item or user, developer or system message.
//   - The keys the Python SDK strips before a model call
//     (MetaToolDescription, MetaToolTitle) are not sent; the stored items
//     keep them.
//   - JSON carries no NaN or infinity: an item holding Python's NaN,
//     Infinity or -Infinity, which a session.Item may, is reported as a
//     *NonFiniteError naming its position, and nothing is returned.
//
// The result may therefore hold fewer than n items. n follows Latest's
// rules (0 gives none, a negative n is session.ErrInvalidLimit); All gives
// the whole history. Window does the same for a history in memory.
func ModelInput(ctx context.Context, s session.Session, n int) ([]session.Item, error) {
	if n <= 0 {
		if _, err := session.Latest(ctx, s, n); err != nil {
			return nil, err
		}
		return []session.Item{}, nil
	}
	// One item more than the window tells, in the common case, whether
	// the window starts inside a response; a read that returns less than
	// asked holds the whole history.
	read := n
	if n < All {
		read = n + 1
	}
	for {
		items, err := session.Latest(ctx, s, read)
		if err != nil {
			return nil, err
		}
		cut := max(len(items)-n, 0)
		owned, known := startsInResponse(items[:cut], items[cut:], len(items) < read)
		if known {
			win := items[cut:]
			return forModel(win, windowKeep(win, owned))
		}
		if read > All/2 {
			read = All
		} else {
			read *= 2
		}
	}
}

// Window returns the model input of the newest n items of history as
// ModelInput returns it from a session holding history: pruned by the
// same rules, looking before the window as ModelInput does, without the
// Python SDK's internal keys, and a *NonFiniteError for an item the API
// cannot take. history itself is not modified. n follows Latest's rules.
func Window(history []session.Item, n int) ([]session.Item, error) {
	if n < 0 {
		return nil, session.ErrInvalidLimit
	}
	cut := max(len(history)-n, 0)
	owned, _ := startsInResponse(history[:cut], history[cut:], true)
	win := history[cut:]
	return forModel(win, windowKeep(win, owned))
}

// SafeWindow prunes a window cut out of a longer history by ModelInput's
// rules for calls, outputs and reasoning items. It sees only the window, so
// it takes the items before the window's first reasoning item or user,
// developer or system message to be a response's whole beginning; Window
// and ModelInput look before the window to know. It neither strips keys
// nor checks numbers (ForModel does).
func SafeWindow(items []session.Item) []session.Item {
	return kept(items, windowKeep(items, false))
}

// startsInResponse reports whether the window win starts inside a
// response that has a reasoning item before the window: its first item
// is not a reasoning item nor a user, developer or system message, and the
// nearest of those before it, in before, is a reasoning item. known is
// false when before holds neither and whole is false (the history goes on
// before it).
func startsInResponse(before, win []session.Item, whole bool) (owned, known bool) {
	if len(win) == 0 || startsGroup(win[0]) {
		return false, true
	}
	for i := len(before) - 1; i >= 0; i-- {
		if before[i].Type() == TypeReasoning {
			return true, true
		}
		if startsGroup(before[i]) {
			return false, true
		}
	}
	return false, whole
}

// startsGroup reports whether it begins a run of items a cut before it
// cannot split: a reasoning item, or a user, developer or system message.
func startsGroup(it session.Item) bool {
	switch it.Type() {
	case TypeReasoning:
		return true
	case "", "message":
		return isInputRole(it.Role())
	}
	return false
}

// windowKeep returns which items of a window are sent. With owned, the
// items before the window's first reasoning item or user, developer or
// system message belong to a response whose reasoning item is outside the
// window and go. Then the orphan prune and the reasoning rules run until
// neither drops anything: each can orphan an item for the other (a dropped
// call takes its reasoning item and the rest of its response, whose calls
// take their outputs). A window with no reasoning item takes one prune.
func windowKeep(items []session.Item, owned bool) []bool {
	facts := factsOf(items)
	var present []bool
	if owned {
		present = make([]bool, len(facts))
		head := true
		for i, f := range facts {
			if head && (f.boundary || f.typ == TypeReasoning) {
				head = false
			}
			present[i] = !head
		}
	}
	opts := PruneOptions{DropOrphanOutputs: true}
	for {
		keep := prune(facts, opts, present)
		if !reasoningRules(facts, keep) {
			return keep
		}
		present = keep
	}
}

// reasoningRules drops from keep a reasoning item whose following item
// (the next item that is not a reasoning item) is missing, dropped or a
// user, developer or system message, and every item whose reasoning item
// (the nearest before it, with no user, developer or system message
// between) is dropped. It reports whether it dropped anything.
func reasoningRules(facts []facts, keep []bool) bool {
	changed := false
	next := -1 // the following item of a reasoning item at i, -1 for none
	seen := false
	for i := len(facts) - 1; i >= 0; i-- {
		if facts[i].typ != TypeReasoning {
			next = i
			continue
		}
		seen = true
		if keep[i] && (next < 0 || facts[next].boundary || !keep[next]) {
			keep[i], changed = false, true
		}
	}
	if !seen {
		return false
	}
	owner := -1 // the reasoning item the current item belongs to
	for i, f := range facts {
		switch {
		case f.typ == TypeReasoning:
			owner = i
		case f.boundary:
			owner = -1
		case owner >= 0 && !keep[owner] && keep[i]:
			keep[i], changed = false, true
		}
	}
	return changed
}
