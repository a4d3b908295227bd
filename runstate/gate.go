package runstate

// Gate describes a resume for the output-guardrail gate rule (semantics §3.5.7).
type Gate struct {
	// OutputGuardrails: the agent or run config has output guardrails.
	OutputGuardrails bool
	// Deferral: the deferral gate is on (ShouldDefer).
	Deferral bool
	// BoundaryProven: the current-response boundary is proven from
	// lifecycle position or object identity.
	BoundaryProven bool
	// SessionAttached: a session is attached to the resume.
	SessionAttached bool
}

// CheckOutputGuardrailGate applies the gate rule when resuming an
// interruption step with output guardrails: ErrBoundaryUnproven when the
// boundary is not proven; with items already persisted this turn and the
// deferral gate on, ErrPersistedBeforeGate with a session attached, or a
// reset of cp.PersistedCount to 0 without one.
func (cp *Checkpoint) CheckOutputGuardrailGate(g Gate) error {
	if cp.Step.Kind != StepInterruption || !g.OutputGuardrails {
		return nil
	}
	if !g.BoundaryProven {
		return ErrBoundaryUnproven
	}
	if cp.PersistedCount > 0 && g.Deferral {
		if g.SessionAttached {
			return ErrPersistedBeforeGate
		}
		cp.PersistedCount = 0
	}
	return nil
}
