use super::named::{Named, PgQuery, Table};
use super::*;

impl Named for Project {
    const TABLE: &'static str = "projects";
    const NAME: &'static str = "slug";
    const ORDER: &'static str = "slug COLLATE \"C\"";
    fn cols() -> String {
        project_cols()
    }
    fn from_row(row: &PgRow) -> StoreResult<Self> {
        project_from_row(row)
    }
}

impl Table for Project {
    fn bind_insert<'q>(&'q self, q: PgQuery<'q>) -> PgQuery<'q> {
        let q = q.bind(self.id).bind(&self.slug);
        bind_meta!(self.bind_own(q), self.meta)
            .bind(self.created_at)
            .bind(self.updated_at)
    }
    const OWN: &'static [&'static str] = &["name", "description", "status"];
    fn bind_own<'q>(&self, q: PgQuery<'q>) -> PgQuery<'q> {
        q.bind(self.name.clone())
            .bind(self.description.clone())
            .bind(self.status.as_str())
    }
}
