package dbname

import (
	"errors"
	"testing"
)

func TestView(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"backquoted expanded text", "SELECT `t`.`a`, `t`.`b` FROM `sales`.`t`", "SELECT `t`.`a`, `t`.`b` FROM `pfx_sales`.`t`"},
		{"unquoted", "select * from sales.t", "select * from pfx_sales.t"},
		{"spaces around the dot", "select * from sales . t", "select * from pfx_sales . t"},
		{"unqualified table", "select * from t", "select * from t"},
		{"join", "SELECT * FROM a.x JOIN b.y ON x.k = y.k LEFT OUTER JOIN `c`.`z` ON y.k = z.k",
			"SELECT * FROM pfx_a.x JOIN pfx_b.y ON x.k = y.k LEFT OUTER JOIN `pfx_c`.`z` ON y.k = z.k"},
		{"comma list with aliases", "select 1 from a.x xx, b.y as yy, z where xx.k = c.d",
			"select 1 from pfx_a.x xx, pfx_b.y as yy, z where xx.k = c.d"},
		{"subquery", "select * from (select k from a.x) s join (select k from b.y where b = 'from c.d') u on s.k = u.k",
			"select * from (select k from pfx_a.x) s join (select k from pfx_b.y where b = 'from c.d') u on s.k = u.k"},
		{"comma after subquery", "select * from (select 1 from a.x) s, b.y", "select * from (select 1 from pfx_a.x) s, pfx_b.y"},
		{"select list commas are not tables", "select a.b, c.d from e.f", "select a.b, c.d from pfx_e.f"},
		{"function args in where", "select * from a.x where f(b.c, d.e) > 0", "select * from pfx_a.x where f(b.c, d.e) > 0"},
		{"string literals", `select 'from a.x', "join b.y", 'it\'s from c.z' from d.w`, `select 'from a.x', "join b.y", 'it\'s from c.z' from pfx_d.w`},
		{"comments", "select 1 -- from a.x\n from /* join b.y */ c.z", "select 1 -- from a.x\n from /* join b.y */ pfx_c.z"},
		{"union", "select k from a.x union all select k from b.y", "select k from pfx_a.x union all select k from pfx_b.y"},
		{"cte", "with q as (select * from a.x) select * from q", "with q as (select * from pfx_a.x) select * from q"},
		{"escaped backquote", "select * from `we``ird`.t", "select * from `pfx_we``ird`.t"},
		{"keywords in any case", "SeLeCt * FrOm a.x", "SeLeCt * FrOm pfx_a.x"},
		{"lateral view", "select * from a.x lateral view explode(b.c) t as d", "select * from pfx_a.x lateral view explode(b.c) t as d"},
		{"unterminated", "select * from `a", "select * from `a"},
		{"empty", "", ""},
		{"qualified function", "select sales.to_eur(amount), upper(x) from sales.t", "select pfx_sales.to_eur(amount), upper(x) from pfx_sales.t"},
		{"quoted function qualifier", "select `sales`.`f` (a) from t", "select `pfx_sales`.`f` (a) from t"},
		{"column path is no qualifier", "select a.b.c(x), s.f from t", "select a.b.c(x), s.f from t"},
	} {
		got, err := View(tc.in, func(db string) (string, error) { return add(db), nil })
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
			continue
		}
		back, err := View(got, strip)
		if err != nil || back != tc.in {
			t.Errorf("%s: strip back: got %q, %v; want %q", tc.name, back, err, tc.in)
		}
	}
}

func TestViewQuotesWhatNeedsIt(t *testing.T) {
	got, err := View("select * from a.x, `b`.y", func(db string) (string, error) { return db + "-1", nil })
	if want := "select * from `a-1`.x, `b-1`.y"; err != nil || got != want {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
	got, _ = View("select * from a.x", func(string) (string, error) { return "9", nil })
	if want := "select * from `9`.x"; got != want {
		t.Errorf("all digits: got %q; want %q", got, want)
	}
}

func TestViewRefuses(t *testing.T) {
	_, err := View("select * from pfx_a.x join other.y", strip)
	if !errors.Is(err, errForeign) {
		t.Errorf("got %v; want errForeign", err)
	}
}
