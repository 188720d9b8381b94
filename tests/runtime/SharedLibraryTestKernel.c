// Built as a shared object that SharedLibraryTest loads from memory.
int q3_test_add(int a, int b) { return a + b + 1000; }
