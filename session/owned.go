package session

import (
	"fmt"

	"github.com/agentsessions/sessions/session/internal/owned"
)

func init() {
	owned.Item = func(b []byte) (any, error) {
		it, err := newItem(b)
		if err != nil {
			return Item{}, fmt.Errorf("%w: %w", ErrCorruptRecord, err)
		}
		return it, nil
	}
	owned.Block = func(n int) any { return &itemBlock{data: make([]itemData, n)} }
	owned.InBlock = func(block any, b []byte) (any, error) {
		bl := block.(*itemBlock)
		d := &bl.data[0]
		bl.data = bl.data[1:]
		it, err := d.hold(b)
		if err != nil {
			return Item{}, fmt.Errorf("%w: %w", ErrCorruptRecord, err)
		}
		return it, nil
	}
	owned.ValidateBatch = func(items any) error { return validateBatch(items.([]Item)) }
}

// validateBatch checks that every item of a batch is valid, so that nothing
// is written for a batch that AddItems would refuse.
func validateBatch(items []Item) error {
	for i, it := range items {
		if !it.Valid() {
			return &ItemError{Index: i}
		}
	}
	return nil
}

// itemBlock is the bookkeeping of several Items allocated at once, for
// session/driver's Decoder: each Item takes the first unused itemData.
type itemBlock struct{ data []itemData }
