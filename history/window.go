package history

import (
	"context"

	"github.com/agentsessions/sessions/session"
)

// ModelInput reads the newest n items of s for a model call and makes the
// window safe to send: an output whose call fell outside the window is
// dropped (the Responses API rejects it with "No tool call found for
// function call output"), a call whose output is missing is dropped, and a
// reasoning item goes with the call it precedes. The result may therefore
// hold fewer than n items. n follows Latest's rules.
func ModelInput(ctx context.Context, s session.Session, n int) ([]session.Item, error) {
	items, err := session.Latest(ctx, s, n)
	if err != nil {
		return nil, err
	}
	return SafeWindow(items), nil
}

// SafeWindow prunes a window cut out of a longer history as ModelInput
// does.
func SafeWindow(items []session.Item) []session.Item {
	return kept(items, PruneOrphans(items, PruneOptions{DropOrphanOutputs: true}))
}
