//! The per-document checks that enforce the field limits of
//! [`crate::limits`]: text sizes, label counts, no NUL in free text.

use crate::kinds::Manifest;
use crate::limits::*;
use crate::load::{Document, Segment};
use crate::names::{Annotations, Labels};
use crate::ManifestError;

/// The field limits of one document: text sizes, label counts, no NUL in
/// free text. Names and label keys and values need no check here: their
/// types only hold valid ones.
pub fn check_document(doc: &Document) -> Vec<ManifestError> {
    let mut c = Checker {
        doc,
        errors: Vec::new(),
    };
    match &doc.manifest {
        Manifest::Project(p) => {
            c.metadata(&p.metadata.labels, &p.metadata.annotations);
            c.resource_version(p.metadata.resource_version.as_deref());
            if let Some(name) = &p.spec.display_name {
                c.text("spec.displayName", name, DISPLAY_NAME_MAX_BYTES);
            }
            if let Some(repo) = &p.spec.repository {
                // A URL is a path's length at most, as a Webhook's (issue
                // 32); refs are bounded by kinds::REF_MAX_BYTES.
                c.text("spec.repository.url", &repo.url, CWD_MAX_BYTES);
            }
            c.text(
                "spec.description",
                &p.spec.description,
                DESCRIPTION_MAX_BYTES,
            );
        }
        Manifest::Task(t) => {
            c.metadata(&t.metadata.labels, &t.metadata.annotations);
            c.resource_version(t.metadata.resource_version.as_deref());
            c.text("spec.title", &t.spec.title, TITLE_MAX_BYTES);
            c.text(
                "spec.description",
                &t.spec.description,
                DESCRIPTION_MAX_BYTES,
            );
            if let Some(who) = &t.spec.assignee {
                c.text("spec.assignee", who, ASSIGNEE_MAX_BYTES);
            }
            if t.spec.depends_on.len() > DEPENDS_ON_MAX {
                c.errors.push(doc.error_at(
                    "spec.dependsOn",
                    format!(
                        "{} dependencies, expected at most {DEPENDS_ON_MAX}",
                        t.spec.depends_on.len()
                    ),
                ));
            }
        }
        Manifest::Run(r) => {
            c.metadata(&r.metadata.labels, &r.metadata.annotations);
            c.resource_version(r.metadata.resource_version.as_deref());
            c.text("spec.prompt", &r.spec.prompt, PROMPT_MAX_BYTES);
            c.text("spec.cwd", &r.spec.cwd, CWD_MAX_BYTES);
            if let Some(crate::kinds::Target::Selector(labels)) = &r.spec.target {
                c.label_count("spec.target.selector", labels);
            }
            if let Some(argv) = &r.spec.command {
                c.command(argv);
            }
        }
        Manifest::Host(h) => {
            c.metadata(&h.metadata.labels, &h.metadata.annotations);
            c.resource_version(h.metadata.resource_version.as_deref());
            c.label_count("spec.labels", &h.spec.labels);
        }
        Manifest::Webhook(w) => {
            c.metadata(&w.metadata.labels, &w.metadata.annotations);
            c.resource_version(w.metadata.resource_version.as_deref());
            c.text("spec.url", &w.spec.url, CWD_MAX_BYTES);
            for t in &w.spec.topics {
                c.text("spec.topics", t, CWD_MAX_BYTES);
            }
            c.text(
                "spec.signingSecretRef.key",
                &w.spec.signing_secret_ref.key,
                CWD_MAX_BYTES,
            );
        }

        Manifest::Schedule(s) => {
            c.metadata(&s.metadata.labels, &s.metadata.annotations);
            c.resource_version(s.metadata.resource_version.as_deref());
            c.text("spec.schedule", &s.spec.schedule, NAME_MAX_BYTES * 4);
            c.text("spec.timeZone", &s.spec.time_zone, NAME_MAX_BYTES);
            c.text(
                "spec.runTemplate.prompt",
                &s.spec.run_template.prompt,
                PROMPT_MAX_BYTES,
            );
            c.text(
                "spec.runTemplate.cwd",
                &s.spec.run_template.cwd,
                CWD_MAX_BYTES,
            );
            if let Some(argv) = &s.spec.run_template.command {
                c.command(argv);
            }
        }
        Manifest::Secret(s) => {
            // Values: base64, key names, 1 MiB in all.
            c.metadata(&s.metadata.labels, &s.metadata.annotations);
            c.resource_version(s.metadata.resource_version.as_deref());
            if let Err(problems) = s.spec.values() {
                for (path, message) in problems {
                    c.errors.push(doc.error_at(&path, message));
                }
            }
        }
        Manifest::Source(s) => {
            c.metadata(&s.metadata.labels, &s.metadata.annotations);
            c.resource_version(s.metadata.resource_version.as_deref());
            if let Some(path) = &s.spec.path {
                c.text("spec.path", path, CWD_MAX_BYTES);
            }
            if let Some(git) = &s.spec.git {
                c.text("spec.git.url", &git.url, CWD_MAX_BYTES);
                c.text("spec.git.ref", &git.reference, CWD_MAX_BYTES);
                c.text("spec.git.path", &git.path, CWD_MAX_BYTES);
            }
        }
        // A generically stored kind: its metadata; its spec's
        // own rules are `Manifest::generic_problems`.
        m => {
            c.metadata(m.labels(), m.annotations());
            c.resource_version(m.resource_version());
        }
    }
    c.errors
}

const NUL_MESSAGE: &str = "must not contain NUL (\\0) characters, expected text without them";

struct Checker<'a> {
    doc: &'a Document,
    errors: Vec<ManifestError>,
}

impl Checker<'_> {
    /// Free text: no NUL (PostgreSQL text cannot hold it), at most `max`
    /// bytes.
    fn text(&mut self, path: &str, text: &str, max: usize) {
        if text.contains('\0') {
            self.errors.push(self.doc.error_at(path, NUL_MESSAGE));
        } else if text.len() > max {
            self.errors.push(self.doc.error_at(
                path,
                format!("{} bytes, expected at most {max} bytes", text.len()),
            ));
        }
    }

    fn resource_version(&mut self, rv: Option<&str>) {
        if let Some(rv) = rv {
            self.text("metadata.resourceVersion", rv, RESOURCE_VERSION_MAX_BYTES);
        }
    }

    fn label_count(&mut self, path: &str, labels: &Labels) {
        if labels.len() > LABELS_MAX_COUNT {
            self.errors.push(self.doc.error_at(
                path,
                format!(
                    "{} labels, expected at most {LABELS_MAX_COUNT}",
                    labels.len()
                ),
            ));
        }
    }

    fn metadata(&mut self, labels: &Labels, annotations: &Annotations) {
        self.label_count("metadata.labels", labels);
        let mut total = 0;
        for (key, value) in annotations {
            total += key.as_str().len() + value.len();
            if value.contains('\0') {
                let path = [
                    Segment::Key("metadata".into()),
                    Segment::Key("annotations".into()),
                    Segment::Key(key.as_str().into()),
                ];
                self.errors
                    .push(self.doc.error_at_segments(&path, NUL_MESSAGE));
            }
        }
        if total > ANNOTATIONS_MAX_BYTES {
            self.errors.push(self.doc.error_at(
                "metadata.annotations",
                format!("{total} bytes of keys and values, expected at most {ANNOTATIONS_MAX_BYTES} bytes"),
            ));
        }
    }

    fn command(&mut self, argv: &[String]) {
        if argv.len() > COMMAND_MAX_ARGS {
            self.errors.push(self.doc.error_at(
                "spec.command",
                format!(
                    "{} arguments, expected at most {COMMAND_MAX_ARGS}",
                    argv.len()
                ),
            ));
            return;
        }
        for (i, arg) in argv.iter().enumerate() {
            if arg.contains('\0') {
                self.errors.push(
                    self.doc
                        .error_at(&format!("spec.command[{i}]"), NUL_MESSAGE),
                );
            }
        }
        let total: usize = argv.iter().map(String::len).sum();
        if total > COMMAND_MAX_BYTES {
            self.errors.push(self.doc.error_at(
                "spec.command",
                format!("{total} bytes of arguments, expected at most {COMMAND_MAX_BYTES} bytes"),
            ));
        }
    }
}
