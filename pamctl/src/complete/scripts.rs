//! The scripts `pamctl completion SHELL` prints: each asks
//! `pamctl __complete` for the candidates (module doc of `complete`).

use clap_complete::Shell;

const BASH: &str = r#"# pamctl completion for bash.
# This shell:  source <(pamctl completion bash)
# Every shell: pamctl completion bash > /etc/bash_completion.d/pamctl
#          (or ~/.local/share/bash-completion/completions/pamctl)
# Kinds, projects and object names come from the server (`pamctl __complete`,
# 2 s at most per TAB); the connection flags on the line (-p, --server,
# --context) are used.
_pamctl() {
    local line="${COMP_LINE:0:COMP_POINT}"
    local -a words
    read -ra words <<< "$line"
    [[ "$line" == *[[:space:]] ]] && words+=("")
    local cur="${words[${#words[@]}-1]}"
    local out
    out=$(pamctl __complete "${words[@]:1}" 2>/dev/null) || return 0
    local directive="${out##*:}"
    out="${out%:*}"
    # bash completes the part after its own word breaks (= and :); drop
    # what comes before it from each candidate.
    local cw="${COMP_WORDS[COMP_CWORD]}"
    local before="${cur%"$cw"}"
    if (( directive & 1 )); then
        compopt -o filenames 2>/dev/null
        COMPREPLY=($(compgen -f -- "$cw"))
        return 0
    fi
    (( directive & 2 )) && compopt -o nospace 2>/dev/null
    COMPREPLY=()
    local c
    while IFS= read -r c; do
        [[ -z "$c" ]] && continue
        COMPREPLY+=("${c#"$before"}")
    done <<< "$out"
}
complete -F _pamctl pamctl
"#;

const ZSH: &str = r#"#compdef pamctl
# pamctl completion for zsh.
# This shell:  source <(pamctl completion zsh)   (after compinit)
# Every shell: pamctl completion zsh > "${fpath[1]}/_pamctl", then start a new shell
# Kinds, projects and object names come from the server (`pamctl __complete`,
# 2 s at most per TAB); the connection flags on the line (-p, --server,
# --context) are used.
_pamctl() {
    local -a lines cands
    lines=("${(@f)$(pamctl __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    (( ${#lines} )) || return 1
    local directive=${lines[-1]#:}
    cands=("${(@)lines[1,-2]}")
    if (( directive & 1 )); then
        _files
        return
    fi
    if (( directive & 2 )); then
        compadd -S '' -- "${cands[@]}"
    else
        compadd -- "${cands[@]}"
    fi
}
if [[ "${funcstack[1]}" == "_pamctl" ]]; then
    _pamctl "$@"
else
    compdef _pamctl pamctl
fi
"#;

const FISH: &str = r#"# pamctl completion for fish.
# pamctl completion fish > ~/.config/fish/completions/pamctl.fish
# Kinds, projects and object names come from the server (`pamctl __complete`,
# 2 s at most per TAB); the connection flags on the line (-p, --server,
# --context) are used.
function __pamctl_complete
    set -l args (commandline -opc)
    set -e args[1]
    set -l out (pamctl __complete $args (commandline -ct) 2>/dev/null)
    test (count $out) -gt 0; or return
    set -l directive (string replace ':' '' -- $out[-1])
    if test (math "$directive % 2") -eq 1
        __fish_complete_path (commandline -ct)
        return
    end
    set -e out[-1]
    printf '%s\n' $out
end
complete -c pamctl -f -a '(__pamctl_complete)'
"#;

/// The completion script for `shell`; shells without a dynamic script
/// get clap's static one (verbs and flags only).
pub fn script(shell: Shell) -> String {
    match shell {
        Shell::Bash => BASH.to_string(),
        Shell::Zsh => ZSH.to_string(),
        Shell::Fish => FISH.to_string(),
        other => {
            let mut out = Vec::new();
            clap_complete::generate(other, &mut crate::examples::command(), "pamctl", &mut out);
            String::from_utf8_lossy(&out).into_owned()
        }
    }
}
