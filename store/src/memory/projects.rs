use super::named::Table;
use super::*;

impl Table for Project {
    fn copy_own(&mut self, from: &Self) {
        self.name = from.name.clone();
        self.description = from.description.clone();
        self.status = from.status;
    }
    /// Its tasks, runs, Secrets, Schedules and objects go with it.
    fn on_delete(s: &mut State, id: Uuid) -> StoreResult<()> {
        let items = s.ids_in::<WorkItem>(id);
        s.remove_work_items(&items);
        let runs = s.ids_in::<Run>(id);
        s.remove_runs(&runs);
        s.secrets.retain(|_, x| x.project_id != id);
        let gone = s.ids_in::<crate::Schedule>(id);
        s.schedules.retain(|sid, _| !gone.contains(sid));
        s.schedule_runs.retain(|(sid, _), _| !gone.contains(sid));
        s.objects.retain(|_, o| o.project_id != Some(id));
        Ok(())
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
