//! PromQL as the real parser reads it: the metric names an expression selects.

use std::collections::BTreeSet;

/// Every metric name a PromQL expression selects, walking the real parser's AST.
pub fn collect_names(expr: &promql_parser::parser::Expr, out: &mut BTreeSet<String>) {
    use promql_parser::parser::Expr;
    match expr {
        Expr::VectorSelector(v) => {
            if let Some(name) = &v.name {
                out.insert(name.clone());
            }
        }
        Expr::MatrixSelector(m) => collect_names(&Expr::VectorSelector(m.vs.clone()), out),
        Expr::Aggregate(a) => {
            collect_names(&a.expr, out);
            if let Some(p) = &a.param {
                collect_names(p, out);
            }
        }
        Expr::Unary(u) => collect_names(&u.expr, out),
        Expr::Binary(b) => {
            collect_names(&b.lhs, out);
            collect_names(&b.rhs, out);
        }
        Expr::Paren(p) => collect_names(&p.expr, out),
        Expr::Subquery(s) => collect_names(&s.expr, out),
        Expr::Call(c) => {
            for arg in &c.args.args {
                collect_names(arg, out);
            }
        }
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}
