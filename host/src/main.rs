fn main() -> std::process::ExitCode {
    wharf::cli::main()
}
