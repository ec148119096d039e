package filter

import (
	"fmt"
	"testing"
)

func BenchmarkAllowed(b *testing.B) {
	for _, n := range []int{1, 8, 64} {
		allow := make([]string, 0, n)
		deny := make([]string, 0, n)
		for i := 0; i < n; i++ {
			allow = append(allow, fmt.Sprintf("db%d_*", i))
			deny = append(deny, fmt.Sprintf("*.tmp%d_*", i))
		}
		p, err := Compile(allow, deny)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("glob%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Allowed("DB7_sales", "orders_2024")
			}
		})
	}
	p, err := Compile([]string{`re:^db[0-9]+_sales\..*$`}, []string{`re:\.tmp_`})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("regex", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p.Allowed("DB7_sales", "orders_2024")
		}
	})
}

func BenchmarkEval(b *testing.B) {
	for _, tc := range []struct{ name, filter string }{
		{"eq", `ds = '2024-01-02'`},
		{"and3", `ds = '2024-01-02' and hr > 5 and region = 'us'`},
		{"in8", `(region) in ('a', 'b', 'c', 'd', 'e', 'f', 'g', 'us')`},
	} {
		e, err := Parse(tc.filter)
		if err != nil {
			b.Fatal(err)
		}
		values := map[string]string{"ds": "2024-01-02", "hr": "10", "region": "us"}
		types := map[string]string{"ds": "string", "hr": "int", "region": "string"}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ok, err := e.Eval(values, types); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(`(ds = '2024-01-01' or ds = '2024-01-02') and hr > 5 and (region) in ('eu', 'us')`); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBoundEval: a planner's filter decided for one partition, by
// map (Eval) and by key position (Bound.Eval).
func BenchmarkBoundEval(b *testing.B) {
	e, err := Parse(`ds = '2024-01-02' and (hr) in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)`)
	if err != nil {
		b.Fatal(err)
	}
	keys, types := []string{"ds", "hr"}, []string{"string", "int"}
	bound, err := e.Bind(keys, types)
	if err != nil {
		b.Fatal(err)
	}
	vals := []string{"2024-01-02", "11"}
	b.Run("map", func(b *testing.B) {
		b.ReportAllocs()
		typeOf := map[string]string{"ds": "string", "hr": "int"}
		for b.Loop() {
			byKey := map[string]string{"ds": vals[0], "hr": vals[1]}
			if ok, err := e.Eval(byKey, typeOf); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("bound", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ok, err := bound.Eval(vals); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
}
