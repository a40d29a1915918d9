use super::*;

#[async_trait]
impl ProjectTx for MemTx {
    async fn insert_project(&mut self, p: &Project) -> StoreResult<()> {
        self.work.insert_named(p)
    }

    async fn get_project(&mut self, id: Uuid) -> StoreResult<Option<Project>> {
        Ok(self.work.by_id(id))
    }

    async fn get_project_by_slug(&mut self, slug: &str) -> StoreResult<Option<Project>> {
        Ok(self.work.named(None, slug))
    }

    async fn list_projects(&mut self) -> StoreResult<Vec<Project>> {
        Ok(self.work.all_named(None))
    }

    async fn update_project(&mut self, p: &Project, expected_rv: i64) -> StoreResult<Project> {
        let what = format!("project {}", p.id);
        self.work
            .update_named(p, expected_rv, what, |cur: &mut Project, p| {
                cur.name = p.name.clone();
                cur.description = p.description.clone();
                cur.status = p.status;
                Ok(())
            })
    }

    async fn delete_project(&mut self, id: Uuid) -> StoreResult<bool> {
        let s = &mut self.work;
        if s.projects.remove(&id).is_none() {
            return Ok(false);
        }
        let items = s.ids_in::<WorkItem>(id);
        s.remove_work_items(&items);
        let runs = s.ids_in::<Run>(id);
        s.remove_runs(&runs);
        s.secrets.retain(|_, x| x.project_id != id);
        let gone = s.ids_in::<crate::Schedule>(id);
        s.schedules.retain(|sid, _| !gone.contains(sid));
        s.schedule_runs.retain(|(sid, _), _| !gone.contains(sid));
        s.objects.retain(|_, o| o.project_id != Some(id));
        Ok(true)
    }
}

// Its generic reads and key checks (named.rs).
super::named::named!(
    Project,
    projects,
    "projects",
    "projects_slug_key",
    slug,
    |_p| None
);
