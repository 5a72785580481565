"""The gate's boundary sweeps: pure array functions (`compute`) and the report records built from them (`collect`)."""
