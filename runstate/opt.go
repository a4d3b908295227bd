package runstate

// opt is an optional, nullable member of a JSON object: absent (Present is
// false), null (Present, Value nil), or a value. The held record needs all
// three: a re-park keeps the standing record's store "if the key is
// present", even when it is null.
type opt[T any] struct {
	Present bool
	Value   *T
}

// some returns a present, non-null Opt.
func some[T any](v T) opt[T] { return opt[T]{Present: true, Value: &v} }

// null returns a present null Opt.
func null[T any]() opt[T] { return opt[T]{Present: true} }

// optFromPtr returns a present Opt holding *p, or null when p is nil.
func optFromPtr[T any](p *T) opt[T] {
	if p == nil {
		return null[T]()
	}
	v := *p
	return some(v)
}

// Get returns the value when the member is present and not null.
func (o opt[T]) Get() (T, bool) {
	if !o.Present || o.Value == nil {
		var zero T
		return zero, false
	}
	return *o.Value, true
}

// Ptr returns a copy of the value, or nil when absent or null.
func (o opt[T]) Ptr() *T {
	if v, ok := o.Get(); ok {
		return &v
	}
	return nil
}

func (o opt[T]) clone() opt[T] {
	if o.Value == nil {
		return o
	}
	v := *o.Value
	return opt[T]{Present: o.Present, Value: &v}
}

// Policy is the reasoning-item id policy (semantics §3.8): PolicyOmit drops the
// "id" of reasoning items when converting them; PolicyPreserve, like no
// policy (nil), keeps it.
type Policy string

// The reasoning-item id policies.
const (
	PolicyPreserve Policy = "preserve"
	PolicyOmit     Policy = "omit"
)

func (p Policy) valid() bool { return p == PolicyPreserve || p == PolicyOmit }
