package runstate

import (
	"slices"

	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/session"
)

// Test-only access to unexported helpers and state; compiled into the
// package's tests only, so the package's API stays what a loop author calls.

// Helpers of the conversion, dedup and pairing rules.
var (
	Convert          = convert
	Sanitize         = sanitize
	Unpersistable    = unpersistable
	DedupeKey        = dedupeKey
	AnchorType       = anchorType
	SafeToSettle     = safeToSettle
	CoversHeld       = coversHeld
	CompareSchemas   = compareSchemas
	SupportedSchemas = supportedSchemas
	SchemaSummary    = schemaSummary
	Variants         = keyTable
)

// Dedupe is dedupe on items with their facts; it panics when the facts it
// returns are not those of the items it keeps.
func Dedupe(items []session.Item) []session.Item {
	in := slices.Clone(items)
	out, fs := dedupe(in, factsFor(nil, in))
	if !slices.Equal(fs, factsFor(nil, out)) {
		panic("dedupe: the facts returned are not the kept items' facts")
	}
	return out
}

// FactsForAgree reports whether factsFor gives each of items the facts
// factsOf looks up for it alone.
func FactsForAgree(items []session.Item) bool {
	fs := factsFor(nil, items)
	for i, it := range items {
		if fs[i] != factsOf(it) {
			return false
		}
	}
	return true
}

// BatchPairKeys is the call keys and the answered keys of batch as the
// answered check collects them.
func BatchPairKeys(batch []session.Item) (calls, answered []history.PairKey) {
	calls, outputs := pairsOf(batch, factsFor(nil, batch), nil, nil)
	for _, o := range outputs {
		answered = append(answered, o.key)
	}
	return calls, answered
}

// PairKeysOf is the call key and the answered key of it as the save's
// passes read them, from its facts.
func PairKeysOf(it session.Item) (call history.PairKey, isCall bool, answered history.PairKey, isAnswer bool) {
	f := factsOf(it)
	call, isCall = callKeyOf(it, &f)
	answered, isAnswer = answeredKeyOf(it, &f)
	return call, isCall, answered, isAnswer
}

// Variant is a row of the pending-write key table.
type Variant = keyRow

// Member is one raw member of a JSON object.
type Member = member

// Some returns a present, non-null Opt.
func Some[T any](v T) Opt[T] { return some(v) }

// Null returns a present null Opt.
func Null[T any]() Opt[T] { return null[T]() }

// OptFromPtr returns a present Opt holding *p, or null when p is nil.
func OptFromPtr[T any](p *T) Opt[T] { return optFromPtr(p) }

// InProgress reports whether a settle of the checkpoint's record is running.
func (cp *Checkpoint) InProgress() bool { return cp.inProgress }

// WriteSchema is the label MarshalJSON writes.
func (cp *Checkpoint) WriteSchema() string {
	w := cp.Pending
	if w == nil {
		w = cp.claimed
	}
	return cp.writeSchema(w, cp.Terminal || w != nil && !cp.Step.Kind.resumable())
}

// Extra returns the record's unmodelled members.
func (w *PendingWrite) Extra() []Member { return w.extra }

// Clone returns a deep copy of w.
func (w *PendingWrite) Clone() *PendingWrite { return w.clone() }

// Settling returns args with the input slot marked as a settling held
// batch, as SaveResumedTurn and Resume pass it.
func Settling(args SaveArgs) SaveArgs {
	args.settlingHeld = true
	return args
}

// The load rules' and variants' names, as LoadError.Rule and
// PendingWrite.Variant report them.
type Rule = string

const (
	RuleDocument              = string(ruleDocument)
	RuleSchema                = string(ruleSchema)
	RuleStep                  = string(ruleStep)
	RulePersistedItemCount    = string(rulePersistedItemCount)
	RuleTerminalMarker        = string(ruleTerminalMarker)
	RulePendingSchema         = string(rulePendingSchema)
	RulePendingStep           = string(rulePendingStep)
	RulePendingObject         = string(rulePendingObject)
	RulePendingKeys           = string(rulePendingKeys)
	RulePendingHeldType       = string(rulePendingHeldType)
	RulePendingHeldBefore     = string(rulePendingHeldBefore)
	RulePendingHeldKeyTypes   = string(rulePendingHeldKeyTypes)
	RulePendingHeldOnly       = string(rulePendingHeldOnly)
	RulePendingSessionID      = string(rulePendingSessionID)
	RulePendingItems          = string(rulePendingItems)
	RulePendingBefore         = string(rulePendingBefore)
	RulePendingPersistedCount = string(rulePendingPersistedCount)
	RulePendingVariant        = string(rulePendingVariant)

	VariantOrdinary     = variantOrdinary
	VariantHeld         = variantHeld
	VariantCompaction   = variantCompaction
	VariantPendingInput = variantPendingInput
)

// BreakWriter makes MarshalJSON write what it holds without checking it,
// until the returned function is called.
func BreakWriter() (restore func()) {
	brokenWriter = true
	return func() { brokenWriter = false }
}

// Opt is the held record's optional member, for comparisons.
type Opt[T any] = opt[T]

// The held record's optional members as they are.
func (w *PendingWrite) ResponseIDOpt() Opt[string] { return w.responseID }
func (w *PendingWrite) StoreOpt() Opt[bool]        { return w.store }
func (w *PendingWrite) PolicyOpt() Opt[Policy]     { return w.policy }

// SpliceMember exposes spliceMember to the tests.
var SpliceMember = spliceMember

// PythonLayout exposes pythonLayout to the tests.
var PythonLayout = pythonLayout
