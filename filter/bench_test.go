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
