package proxy

import "sync/atomic"

// PruneResult is how one pruning read ended: answered here, left to the
// metastore because the proxy does not evaluate it exactly, or given up
// at a named step. The set is closed: each value is a metric label
// (hmsproxy_prune_total{result}), never anything a client wrote.
type PruneResult uint8

const (
	// PruneLocal: answered from the cache (missing entries fetched first).
	PruneLocal PruneResult = iota
	// PruneInexact: the filter or spec is not one the proxy evaluates
	// exactly (a construct it does not model, a quirk of the version, an
	// integral key with non-canonical values): cached whole or forwarded.
	PruneInexact
	// PruneOverLimit: the metastore would refuse that many partitions
	// (hive.metastore.limit.partition.request): its own answer goes.
	PruneOverLimit
	// PruneForwardTable: the table could not be read for its keys.
	PruneForwardTable
	// PruneForwardKeys: the table's partition keys could not be taken
	// apart.
	PruneForwardKeys
	// PruneForwardNames: the table's partition name list could not be read.
	PruneForwardNames
	// PruneForwardIndex: the name list does not fit the keys (a name the
	// proxy cannot split, or a key count that differs).
	PruneForwardIndex
	// PruneForwardEvaluation: evaluating the filter over a partition
	// failed where the metastore falls back to another evaluator.
	PruneForwardEvaluation
	// PruneForwardPartitions: a selected partition could not be read, or
	// was gone when fetched.
	PruneForwardPartitions
	// PruneForwardRaced: an invalidation came while the reply was
	// assembled.
	PruneForwardRaced

	numPruneResults
)

var pruneResultNames = [numPruneResults]string{
	PruneLocal:             "local",
	PruneInexact:           "inexact",
	PruneOverLimit:         "over_limit",
	PruneForwardTable:      "forwarded_table",
	PruneForwardKeys:       "forwarded_partition_keys",
	PruneForwardNames:      "forwarded_name_list",
	PruneForwardIndex:      "forwarded_name_index",
	PruneForwardEvaluation: "forwarded_evaluation",
	PruneForwardPartitions: "forwarded_partitions",
	PruneForwardRaced:      "forwarded_raced",
}

// String is the result's label value.
func (r PruneResult) String() string {
	if r < numPruneResults {
		return pruneResultNames[r]
	}
	return "unknown"
}

// PruneResults lists every result, in label order.
func PruneResults() []PruneResult {
	out := make([]PruneResult, numPruneResults)
	for i := range out {
		out[i] = PruneResult(i)
	}
	return out
}

// pruneSteps maps the steps pruneRead names when it gives up to their
// results.
var pruneSteps = map[string]PruneResult{
	"table":          PruneForwardTable,
	"partition keys": PruneForwardKeys,
	"name list":      PruneForwardNames,
	"name index":     PruneForwardIndex,
	"evaluation":     PruneForwardEvaluation,
	"partitions":     PruneForwardPartitions,
	"generations":    PruneForwardRaced,
}

// pruneStep is the result of giving up at step at. Every step pruneRead
// names is in pruneSteps (TestPruneStepsNamed); one that is not would
// count as raced, the catch-all of giving up late.
func pruneStep(at string) PruneResult {
	if r, ok := pruneSteps[at]; ok {
		return r
	}
	return PruneForwardRaced
}

// Count is how many pruning reads ended with r.
func (p *PruneStats) Count(r PruneResult) uint64 {
	if r >= numPruneResults {
		return 0
	}
	return p.results[r].Load()
}

// count records one pruning read that ended with r, in the totals the
// tests and the bench read too.
func (p *PruneStats) count(r PruneResult) {
	if r >= numPruneResults {
		return
	}
	p.results[r].Add(1)
	switch {
	case r == PruneLocal:
		p.Local.Add(1)
	case r == PruneInexact || r == PruneOverLimit:
		p.Inexact.Add(1)
	default:
		p.Raced.Add(1)
	}
}

// pruneCounts is PruneStats' count by result.
type pruneCounts [numPruneResults]atomic.Uint64
