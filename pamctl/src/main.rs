fn main() -> std::process::ExitCode {
    pamctl::main()
}
