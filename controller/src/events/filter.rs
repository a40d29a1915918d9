//! Which events a reader keeps: the one topic filter of the event stream
//! (`?topic=`), `GET /api/v1/events`, `pamctl events --topic` and a
//! Webhook's `spec.topics` — a list of topic names and prefixes
//! ending in a dot (`run.`) — and the project filter.

use std::sync::Arc;

use pam_store::Event;

use super::{topic, PublishedEvent};

/// Which events a stream, a page of the journal or a webhook keeps.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    exact: Vec<String>,
    prefixes: Vec<String>,
    /// The projects kept, as (name, uid) (an empty one is not compared);
    /// `None`: any event. An event
    /// names its project by name (`project`) or uid (`project_id`); one
    /// naming neither is not about a project and is dropped by a project
    /// filter.
    projects: Option<Projects>,
    /// The projects the reader's token may see, compared like
    /// `projects`; `None`: every event. An event of another project, or
    /// of none (cluster events), is not sent to a scoped token at all.
    scope: Option<Projects>,
}

/// A set of projects by name and by uid, each looked up in one step: a
/// stream checks every event against its token's projects, and a token
/// may hold hundreds (`bench-sse` with `PAM_BENCH_ROLES=mixed`).
#[derive(Debug, Clone, Default)]
struct Projects {
    names: std::collections::HashSet<String>,
    uids: std::collections::HashSet<String>,
}

impl Projects {
    /// From (name, uid) pairs; an empty one is not compared.
    fn of(pairs: Vec<(String, String)>) -> Projects {
        let mut p = Projects::default();
        for (name, uid) in pairs {
            if !name.is_empty() {
                p.names.insert(name);
            }
            if !uid.is_empty() {
                p.uids.insert(uid);
            }
        }
        p
    }

    fn keeps(&self, project: Option<&str>, project_id: Option<&str>) -> bool {
        project.is_some_and(|n| self.names.contains(n))
            || project_id.is_some_and(|u| self.uids.contains(u))
    }
}

impl Filter {
    /// `topic` is a comma list; an entry ending in `.` is a prefix.
    pub fn new(topic: Option<&str>, project: Option<(String, String)>) -> Filter {
        let topics: Vec<&str> = topic.unwrap_or("").split(',').collect();
        Filter::of(&topics, project.map(|p| vec![p]))
    }

    /// A filter from a list of topic entries (names and `x.` prefixes)
    /// and, when given, the projects kept.
    pub fn of(topics: &[impl AsRef<str>], projects: Option<Vec<(String, String)>>) -> Filter {
        let mut f = Filter {
            projects: projects.map(Projects::of),
            ..Filter::default()
        };
        for t in topics.iter().map(|t| t.as_ref().trim()) {
            if t.is_empty() {
                continue;
            }
            if t.ends_with('.') {
                f.prefixes.push(t.to_string());
            } else {
                f.exact.push(t.to_string());
            }
        }
        f
    }

    /// Only events of these projects (the reader's token's scope).
    pub fn within(mut self, scope: Option<Vec<(String, String)>>) -> Filter {
        self.scope = scope.map(Projects::of);
        self
    }

    pub fn topic_ok(&self, topic: &str) -> bool {
        (self.exact.is_empty() && self.prefixes.is_empty())
            || self.exact.iter().any(|t| t == topic)
            || self.prefixes.iter().any(|p| topic.starts_with(p.as_str()))
    }

    fn project_ok(&self, project: Option<&str>, project_id: Option<&str>) -> bool {
        let of = |ps: &Option<Projects>| ps.as_ref().is_none_or(|ps| ps.keeps(project, project_id));
        of(&self.projects) && of(&self.scope)
    }

    pub fn keeps(&self, e: &Event) -> bool {
        let field = |k: &str| e.payload.get(k).and_then(serde_json::Value::as_str);
        self.topic_ok(&e.topic) && self.project_ok(field("project"), field("project_id"))
    }

    /// Whether to send `p`. `memo` is the stream's last project decision:
    /// consecutive events of one project share their strings
    /// ([`PublishedEvent`]), so a stream with a token's scope looks a
    /// commit's project up once, not once per event (authorization must not
    /// slow fan-out).
    pub fn keeps_published(&self, p: &PublishedEvent, memo: &mut ProjectMemo) -> bool {
        if !self.topic_ok(&p.topic) {
            return false;
        }
        if self.projects.is_none() && self.scope.is_none() {
            return true;
        }
        let same = |a: &Option<Arc<str>>, b: &Option<Arc<str>>| match (a, b) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if let Some((project, project_id, kept)) = &memo.0 {
            if same(project, &p.project) && same(project_id, &p.project_id) {
                return *kept;
            }
        }
        let kept = self.project_ok(p.project.as_deref(), p.project_id.as_deref());
        memo.0 = Some((p.project.clone(), p.project_id.clone(), kept));
        kept
    }
}

/// [`Filter::keeps_published`]'s last project decision, holding the
/// strings it was made for (so no other string can take their place).
#[derive(Debug, Default)]
#[allow(clippy::type_complexity)]
pub struct ProjectMemo(Option<(Option<Arc<str>>, Option<Arc<str>>, bool)>);

/// Whether a topic entry (a name, or a prefix ending in a dot) matches
/// any topic pam journals ([`topic::ALL`]): a Webhook's topics must.
pub fn names_a_topic(entry: &str) -> bool {
    let f = Filter::of(&[entry], None);
    !entry.trim().is_empty() && topic::ALL.iter().any(|t| f.topic_ok(t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(topic: &str, payload: serde_json::Value) -> Event {
        Event {
            xid: 0,
            seq: 1,
            topic: topic.into(),
            payload,
            created_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn topics_prefixes_and_projects() {
        let f = Filter::of(&["run.", "worker.offline"], None);
        assert!(f.keeps(&ev("run.finished", json!({}))));
        assert!(f.keeps(&ev("worker.offline", json!({}))));
        assert!(!f.keeps(&ev("worker.registered", json!({}))));
        let f = Filter::of(&["run."], Some(vec![("web".into(), "u-1".into())]));
        assert!(f.keeps(&ev("run.created", json!({"project_id": "u-1"}))));
        assert!(!f.keeps(&ev("run.created", json!({"project_id": "u-2"}))));
        assert!(!f.keeps(&ev("run.created", json!({}))));
        // Projects named but none exists: nothing.
        let f = Filter::of(&["run."], Some(vec![]));
        assert!(!f.keeps(&ev("run.created", json!({"project_id": "u-1"}))));
    }

    /// A scoped stream decides a commit's project once per run of events
    /// naming it, and decides again where the project changes.
    #[test]
    fn scope_over_a_commit() {
        let events: Vec<Event> = ["web", "web", "api", "api", "web"]
            .iter()
            .map(|p| ev("work_item.created", json!({"project": p})))
            .chain([ev("worker.offline", json!({}))])
            .collect();
        let published = super::super::Published::new(&events);
        let scoped = Filter::of(&["work_item.", "worker."], None)
            .within(Some(vec![("web".into(), String::new())]));
        let mut memo = ProjectMemo::default();
        let kept: Vec<bool> = published
            .events
            .iter()
            .map(|e| scoped.keeps_published(e, &mut memo))
            .collect();
        assert_eq!(kept, [true, true, false, false, true, false]);
        // The same commit through the journal path decides the same.
        let direct: Vec<bool> = events.iter().map(|e| scoped.keeps(e)).collect();
        assert_eq!(kept, direct);
        // Consecutive events of one project share one string.
        let (a, b) = (&published.events[0], &published.events[1]);
        assert!(std::sync::Arc::ptr_eq(
            a.project.as_ref().unwrap(),
            b.project.as_ref().unwrap()
        ));
    }

    #[test]
    fn known_topics() {
        assert!(names_a_topic("run."));
        assert!(names_a_topic("run.finished"));
        assert!(names_a_topic("work_item."));
        assert!(!names_a_topic("run.finish"));
        assert!(!names_a_topic("jobs."));
        assert!(!names_a_topic(""));
    }
}
