pub mod counting_alloc;
