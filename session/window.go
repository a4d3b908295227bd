package session

import "context"

// ModelInput reads the newest n items of s for a model call and makes the
// window safe to send: an output whose call fell outside the window is
// dropped (the Responses API rejects it with "No tool call found for
// function call output"), a call whose output is missing is dropped, and a
// reasoning item goes with the call it precedes. The result may therefore
// hold fewer than n items. n follows Latest's rules.
func ModelInput(ctx context.Context, s Session, n int) ([]Item, error) {
	items, err := Latest(ctx, s, n)
	if err != nil {
		return nil, err
	}
	return SafeWindow(items), nil
}

// SafeWindow prunes a window cut out of a longer history as ModelInput
// does.
func SafeWindow(items []Item) []Item {
	return Keep(items, PruneOrphans(items, PruneOptions{DropOrphanOutputs: true}))
}
