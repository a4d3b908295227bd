package legacy

import "math"

// rejected is one element of a read that could not be converted.
type rejected[A any] struct {
	pos int // index in the slice the read returned
	v   A
	err error
}

// convertAll converts every element, setting aside those conv refuses.
func convertAll[A, B any](in []A, conv func(A) (B, error)) ([]B, []rejected[A]) {
	out := make([]B, 0, len(in))
	var bad []rejected[A]
	for i, v := range in {
		w, err := conv(v)
		if err != nil {
			bad = append(bad, rejected[A]{i, v, err})
			continue
		}
		out = append(out, w)
	}
	return out, bad
}

// latestValid returns the newest n (n > 0) elements that conv accepts,
// oldest first, from fetch, which returns the newest limit elements oldest
// first (all of them when limit is 0). Elements conv refuses do not count
// toward n: when a window holds some, the window doubles until it holds n
// good ones or reaches the start of the history (a read shorter than its
// limit). The refused elements of the final read are returned for
// reporting.
func latestValid[A, B any](n int, fetch func(limit int) ([]A, error), conv func(A) (B, error)) ([]B, []rejected[A], error) {
	limit := n
	for {
		raw, err := fetch(limit)
		if err != nil {
			return nil, nil, err
		}
		out, bad := convertAll(raw, conv)
		if len(out) >= n || len(raw) < limit || limit == 0 {
			if len(out) > n {
				out = out[len(out)-n:]
			}
			return out, bad, nil
		}
		if limit > math.MaxInt/2 {
			limit = 0 // read everything
		} else {
			limit *= 2
		}
	}
}
