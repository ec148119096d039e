package twin_test

import (
	"testing"

	"github.com/hmsproxy/hmsproxy/e2e/twin"
)

// TestFound40Seed936896757Op1850 was written by the twin (seed 936896757, {Version:4.0 Nodes:3 Federation:}),
// with one step added by hand (the form answered once).
// get_partitions_by_filter_req (filter-ne:req, session 2): proxy {0:[]}; metastore
// {1:{1:"java.lang.NullPointerException: catName is null"}}
func TestFound40Seed936896757Op1850(t *testing.T) {
	twin.Replay(t, twin.Setup{Version: "4.0", Nodes: 3, Federation: ""}, []twin.Step{
		{S: 0, Via: twin.Proxy, Op: twin.CreateDatabase{DB: twin.Name{Base: "d0", Form: twin.Form{Case: 0x0, Lead: "", Trail: "", Uni: 0x0, Pad: 0}}}, Gen: "setup", Racy: false, Wait: 0},
		{S: 0, Via: twin.Direct, Op: twin.CreateTable{DB: twin.DBName{Name: twin.Name{Base: "d0", Form: twin.Form{Case: 0x0, Lead: "", Trail: "", Uni: 0x0, Pad: 0}}, Cat: ""}, Table: twin.Name{Base: "ts", Form: twin.Form{Case: 0x0, Lead: "", Trail: "", Uni: 0x0, Pad: 0}}, Spec: twin.TableSpec{Kind: 0x0, Cols: []twin.Col{twin.Col{Name: "id", Type: "int"}, twin.Col{Name: "name", Type: "string"}}, Keys: []twin.Col{twin.Col{Name: "ds", Type: "string"}}, Params: map[string]string(nil)}, Location: ""}, Gen: "setup", Racy: false, Wait: 0},
		// A request of the same form the metastore answers: the proxy then
		// knows the form (the run that found it had made thousands).
		{S: 2, Via: twin.Both, Op: twin.GetPartitionsByFilterReq{DB: twin.Name{Base: "d0", Form: twin.Form{Case: 0x0, Lead: "", Trail: "", Uni: 0x0, Pad: 0}}, Table: twin.Name{Base: "ts", Form: twin.Form{Case: 0x0, Lead: "", Trail: "", Uni: 0x0, Pad: 0}}, Filter: "ds = 'a'", Max: -1}, Gen: "filter-ne:req", Racy: false, Wait: 0},
		{S: 2, Via: twin.Both, Op: twin.GetPartitionsByFilterReq{DB: twin.Name{Base: "d0", Form: twin.Form{Case: 0x0, Lead: "", Trail: "", Uni: 0x0, Pad: 0}}, Table: twin.Name{Base: "ts", Form: twin.Form{Case: 0x0, Lead: "", Trail: "", Uni: 0x0, Pad: 0}}, Filter: "ds <> 'a%b'", Max: 3}, Gen: "filter-ne:req", Racy: false, Wait: 0},
	})
}
